-- Positive reviews (Databricks' boolean idiom) with a sentiment label.
-- quail query examples/databricks/reviews.sql --dialect databricks --table reviews=examples/data/reviews.csv
SELECT id, review,
       ai_classify(review, ARRAY('positive', 'negative')) AS sentiment
FROM reviews
WHERE ai_classify(concat('Is this product review positive? Review: ', review),
                  ARRAY('yes', 'no')) = 'yes'
ORDER BY id
