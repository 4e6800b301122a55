-- A one-line reply to every negative review.
-- quail query examples/snowflake/generate.sql --dialect snowflake --table reviews=examples/data/reviews.csv
SELECT id,
       AI_COMPLETE('llama3.1-8b',
                   PROMPT('Write a one-sentence apology for this review: {0}', review),
                   {'max_tokens': 40}) AS reply
FROM reviews
WHERE AI_FILTER(PROMPT('Is this review negative? {0}', review))
ORDER BY id
LIMIT 5
