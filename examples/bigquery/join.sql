-- Reviews matched to products by meaning (comma join: AI.IF spans both tables).
-- quail query examples/bigquery/join.sql --dialect bigquery --table reviews=examples/data/reviews.csv --table products=examples/data/products.csv
SELECT p.name, r.review
FROM reviews AS r, products AS p
WHERE r.product_id = p.product_id
  AND AI.IF(('Does this review: ', r.review,
             ' complain about a broken part of this product: ', p.description, '?'))
ORDER BY p.name, r.id
