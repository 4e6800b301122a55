-- A short reply to the first reviews (Snowflake AI_COMPLETE names a model).
select
    id,
    AI_COMPLETE(
        'llama3.1-8b',
        CONCAT('Write a one-sentence reply to this customer review: ', review_text),
        {'max_tokens': 12}
    ) as reply
from {{ ref('shop_reviews') }}
where id <= {{ var('reply_limit', 2) }}
