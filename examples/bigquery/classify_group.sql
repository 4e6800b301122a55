-- Sentiment counts per product.
-- quail query examples/bigquery/classify_group.sql --dialect bigquery --table reviews=examples/data/reviews.csv
SELECT product_id,
       AI.CLASSIFY(review, categories => ['positive', 'negative']) AS sentiment,
       COUNT(*) AS n
FROM reviews
GROUP BY product_id, sentiment
ORDER BY product_id, n DESC
