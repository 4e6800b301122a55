-- Reviews about delivery: the AI_FILTER call is written by a macro, so only the compiled SQL
-- shows it.
select id, product, review_text
from {{ ref('shop_reviews') }}
where {{ review_is_about('review_text', 'delivery') }}
