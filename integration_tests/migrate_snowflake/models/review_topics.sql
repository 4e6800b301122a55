-- One topic per review (Snowflake AI_CLASSIFY, unwrapped to a string).
select
    id,
    product,
    AI_CLASSIFY(review_text, ['delivery', 'quality', 'price']):labels[0]::string as topic
from {{ ref('shop_reviews') }}
