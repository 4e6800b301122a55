-- Products with at least one review that complains about a broken part (semi-join).
-- quail query examples/databricks/join.sql --dialect databricks --table reviews=examples/data/reviews.csv --table products=examples/data/products.csv
SELECT p.name
FROM products AS p
WHERE EXISTS (
    SELECT 1 FROM reviews AS r
    WHERE r.product_id = p.product_id
      AND ai_classify(concat('Does this review: ', r.review,
                             ' complain about a broken part of this product: ', p.description),
                      ARRAY('yes', 'no')) = 'yes')
ORDER BY p.name
