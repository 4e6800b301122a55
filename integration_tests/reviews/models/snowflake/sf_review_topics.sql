-- Snowflake Cortex: a semantic join between reviews and topics.
select r.id, t.topic
from {{ ref('reviews') }} as r
join {{ ref('topics') }} as t
  on AI_FILTER(PROMPT('Review: {0}\nDoes this review talk about {1}?', r.review_text, t.topic))
