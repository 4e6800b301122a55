-- Positive reviews that praise comfort or quality, with a sentiment label.
-- quail query examples/snowflake/reviews.sql --dialect snowflake --table reviews=examples/data/reviews.csv
SELECT
    r.id,
    r.review,
    AI_CLASSIFY(r.review, ['positive', 'negative']):labels[0]::STRING AS sentiment
FROM reviews AS r
WHERE AI_FILTER(PROMPT('Is this product review positive? Review: {0}', r.review))
ORDER BY r.id
