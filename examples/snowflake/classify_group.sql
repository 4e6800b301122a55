-- Sentiment counts per product.
-- quail query examples/snowflake/classify_group.sql --dialect snowflake --table reviews=examples/data/reviews.csv --table products=examples/data/products.csv
WITH labelled AS (
    SELECT product_id,
           AI_CLASSIFY(review, ['positive', 'negative']):labels[0]::STRING AS sentiment
    FROM reviews
)
SELECT p.name, l.sentiment, COUNT(*) AS n
FROM labelled AS l
JOIN products AS p ON p.product_id = l.product_id
GROUP BY p.name, l.sentiment
ORDER BY p.name, n DESC
