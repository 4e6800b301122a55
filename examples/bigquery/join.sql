-- Each review matched to the product it describes, by meaning alone (comma join: AI.IF spans
-- both tables; the last column shows whether the match agrees with product_id).
-- quail query examples/bigquery/join.sql --dialect bigquery --table reviews=examples/data/reviews.csv --table products=examples/data/products.csv
SELECT p.name, r.id, r.review, r.product_id = p.product_id AS filed_under
FROM reviews AS r, products AS p
WHERE AI.IF(('Does this review: ', r.review, ' describe the product: ', p.name, '?'))
ORDER BY p.name, r.id
