-- ML.GENERATE_TEXT as a map over its input relation (the prompt column).
-- quail query examples/bigquery/generate.sql --dialect bigquery --table reviews=examples/data/reviews.csv
SELECT id, ml_generate_text_llm_result AS summary
FROM ML.GENERATE_TEXT(
    MODEL `project.dataset.gemini`,
    (SELECT id, CONCAT('Summarize the following text in at most 10 words:\n\n', review) AS prompt
     FROM reviews WHERE id <= 5),
    STRUCT(20 AS max_output_tokens, TRUE AS flatten_json_output))
ORDER BY id
