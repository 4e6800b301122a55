-- Sentiment counts per product, most common first.
-- quail query examples/duckdb/classify_group.sql --dialect duckdb --table reviews=examples/data/reviews.csv
SELECT product_id,
       ai_classify(review, ['positive', 'negative']) AS sentiment,
       COUNT(*) AS n
FROM reviews
GROUP BY ALL
ORDER BY product_id, n DESC
