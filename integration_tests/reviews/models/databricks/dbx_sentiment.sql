-- Databricks AI Functions: the same classification as sf_sentiment; merged incrementally.
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}
select
    id,
    review_text,
    ai_classify(review_text, ARRAY('positive', 'negative')) as sentiment
from {{ ref('reviews') }}
where id <= {{ var('max_review_id', 1000000) }}
{% if is_incremental() %}
  and id > (select coalesce(max(id), 0) from {{ this }})
{% endif %}
