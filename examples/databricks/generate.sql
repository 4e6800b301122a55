-- Short summaries of the first reviews.
-- quail query examples/databricks/generate.sql --dialect databricks --table reviews=examples/data/reviews.csv
SELECT id, ai_summarize(review, 10) AS summary
FROM reviews
WHERE id <= 5
ORDER BY id
