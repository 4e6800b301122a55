-- Databricks AI Functions: a label, a yes/no question written as ai_query, a summary, and a
-- document parse that Quail refuses.
with reviews as (
    select 1 as id, 'Arrived late, but works well.' as review_text, cast(null as binary) as scan
)
select
    id,
    ai_classify(review_text, ARRAY('positive', 'negative')) as sentiment,
    ai_summarize(review_text, 5) as summary,
    ai_parse_document(scan) as parsed
from reviews
where ai_query('databricks-meta-llama-3-3-70b-instruct',
               concat('Does this review mention delivery? ', review_text)) = 'yes'
