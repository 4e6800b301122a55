-- Databricks AI Functions: short generated text, written as Parquet with a view on top.
{{ config(materialized='external', format='parquet') }}
select
    id,
    ai_query(
        'databricks-meta-llama-3-3-70b-instruct',
        CONCAT('Name the product in this review in at most three words: ', review_text),
        modelParameters => named_struct('max_tokens', 8)
    ) as product_guess
from {{ ref('reviews') }}
where id <= 6
