-- Positive reviews with a sentiment label.
-- quail query examples/bigquery/reviews.sql --dialect bigquery --table reviews=examples/data/reviews.csv
SELECT id, review,
       AI.CLASSIFY(review, categories => ['positive', 'negative']) AS sentiment
FROM reviews
WHERE AI.IF(('Is this product review positive? Review: ', review))
ORDER BY id
