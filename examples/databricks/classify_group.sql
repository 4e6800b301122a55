-- Sentiment counts per product.
-- quail query examples/databricks/classify_group.sql --dialect databricks --table reviews=examples/data/reviews.csv
SELECT product_id, ai_analyze_sentiment(review) AS sentiment, COUNT(*) AS n
FROM reviews
GROUP BY product_id, ai_analyze_sentiment(review)
ORDER BY product_id, n DESC
