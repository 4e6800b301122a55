-- A one-line reply to the first negative reviews.
-- quail query examples/duckdb/generate.sql --dialect duckdb --table reviews=examples/data/reviews.csv
SELECT id,
       ai_generate('Write a one-sentence apology for this review: {0}', review,
                   max_tokens := 40) AS reply
FROM reviews
WHERE ai_filter('Is this review negative? {0}', review)
ORDER BY id
LIMIT 5
