-- Snowflake Cortex: a semantic filter; only new reviews reach the model on incremental runs.
{{ config(materialized='incremental', incremental_strategy='append') }}
select id, review_text, product
from {{ ref('reviews') }}
where id <= {{ var('max_review_id', 1000000) }}
  and AI_FILTER(PROMPT('Is this product review positive? {0}', review_text))
{% if is_incremental() %}
  and id > (select coalesce(max(id), 0) from {{ this }})
{% endif %}
