-- Positive reviews with a sentiment label, in DuckDB SQL with quail's canonical functions.
-- quail query examples/duckdb/reviews.sql --dialect duckdb --table reviews=examples/data/reviews.csv
SELECT id, review,
       ai_classify(review, ['positive', 'negative']) AS sentiment
FROM reviews
WHERE ai_filter('Is this product review positive? Review: {0}', review)
ORDER BY id
