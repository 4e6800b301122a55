-- Sentiment counts per product (ai_analyze_sentiment's four labels also parse; on the default
-- model two labels read far better: see examples/README.md).
-- quail query examples/databricks/classify_group.sql --dialect databricks --table reviews=examples/data/reviews.csv
SELECT product_id, ai_classify(review, ARRAY('positive', 'negative')) AS sentiment, COUNT(*) AS n
FROM reviews
GROUP BY product_id, ai_classify(review, ARRAY('positive', 'negative'))
ORDER BY product_id, n DESC
