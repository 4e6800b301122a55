-- Sentiment per aspect (Snowflake AI_SENTIMENT with aspect categories).
select
    id,
    AI_SENTIMENT(review_text, ['price', 'delivery']) as aspects
from {{ ref('shop_reviews') }}
