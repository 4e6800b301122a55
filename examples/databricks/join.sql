-- Products described by one of the four newest reviews (semi-join: EXISTS with an AI predicate;
-- the plain conjunct r.id > 36 restricts the pairs before any prompt runs).
-- quail query examples/databricks/join.sql --dialect databricks --table reviews=examples/data/reviews.csv --table products=examples/data/products.csv
SELECT p.name
FROM products AS p
WHERE EXISTS (
    SELECT 1 FROM reviews AS r
    WHERE r.id > 36
      AND ai_classify(concat('Does this review: ', r.review, ' describe the product: ', p.name),
                      ARRAY('yes', 'no')) = 'yes')
ORDER BY p.name
