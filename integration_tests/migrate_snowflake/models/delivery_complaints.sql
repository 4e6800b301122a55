-- Reviews about delivery (Snowflake AI_FILTER with PROMPT; the question comes from a macro).
select id, product, review_text
from {{ ref('shop_reviews') }}
where AI_FILTER(PROMPT({{ review_question('delivery') }}, review_text))
