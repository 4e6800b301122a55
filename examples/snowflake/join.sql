-- Each review matched to the product it describes, by meaning alone (product_id is not used;
-- the last column shows whether the match agrees with it).
-- quail query examples/snowflake/join.sql --dialect snowflake --table reviews=examples/data/reviews.csv --table products=examples/data/products.csv
SELECT p.name, r.id, r.review, r.product_id = p.product_id AS filed_under
FROM reviews AS r
JOIN products AS p
  ON AI_FILTER(PROMPT('Does this review: {0} describe the product: {1}?', r.review, p.name))
ORDER BY p.name, r.id
