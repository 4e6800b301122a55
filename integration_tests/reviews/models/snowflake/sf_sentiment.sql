-- Snowflake Cortex: one label per review.
select
    id,
    review_text,
    AI_CLASSIFY(review_text, ['positive', 'negative']):labels[0]::string as sentiment
from {{ ref('reviews') }}
