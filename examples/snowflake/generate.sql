-- A one-line reply to the first negative reviews (negative: a label, which the default model
-- reads well; a yes/no 'Is this review negative?' it does not: see examples/README.md).
-- quail query examples/snowflake/generate.sql --dialect snowflake --table reviews=examples/data/reviews.csv
SELECT id,
       AI_COMPLETE('llama3.1-8b',
                   PROMPT('Write a one-sentence apology to the customer who wrote the following review:\n\n{0}',
                          review),
                   {'max_tokens': 40}) AS reply
FROM reviews
WHERE AI_CLASSIFY(review, ['positive', 'negative']):labels[0]::STRING = 'negative'
ORDER BY id
LIMIT 5
