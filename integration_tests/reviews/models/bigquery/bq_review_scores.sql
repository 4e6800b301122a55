-- BigQuery AI: a score per review, merged by id so a re-run only scores new reviews.
{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='id') }}
select
    id,
    AI.SCORE(('How positive is this review, from 0 to 1? Review: ', review_text)) as positivity
from {{ ref('reviews') }}
where id <= {{ var('max_review_id', 1000000) }}
{% if is_incremental() %}
  and id > (select coalesce(max(id), 0) from {{ this }})
{% endif %}
