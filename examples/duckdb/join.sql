-- Reviews matched to products by meaning.
-- quail query examples/duckdb/join.sql --dialect duckdb --table reviews=examples/data/reviews.csv --table products=examples/data/products.csv
SELECT p.name, r.review
FROM reviews AS r
JOIN products AS p
  ON r.product_id = p.product_id
 AND ai_filter('Does this review: {0} complain about a broken part of this product: {1}?',
               r.review, p.description)
ORDER BY p.name, r.id
