-- A one-line reply to the first negative reviews (negative: a label, which the default model
-- reads well; a yes/no 'Is this review negative?' it does not: see examples/README.md).
-- quail query examples/duckdb/generate.sql --dialect duckdb --table reviews=examples/data/reviews.csv
SELECT id,
       ai_generate('Write a one-sentence apology to the customer who wrote the following review:

{0}',
                   review,
                   max_tokens := 40) AS reply
FROM reviews
WHERE ai_classify(review, ['positive', 'negative']) = 'negative'
ORDER BY id
LIMIT 5
