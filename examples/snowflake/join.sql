-- Reviews matched to the product they describe, by meaning (and by product_id).
-- quail query examples/snowflake/join.sql --dialect snowflake --table reviews=examples/data/reviews.csv --table products=examples/data/products.csv
SELECT p.name, r.review
FROM reviews AS r
JOIN products AS p
  ON r.product_id = p.product_id
 AND AI_FILTER(PROMPT('Does this review: {0} complain about a broken part of this product: {1}?',
                      r.review, p.description))
ORDER BY p.name, r.id
