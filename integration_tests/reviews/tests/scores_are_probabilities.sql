select id, positivity
from {{ ref('bq_review_scores') }}
where positivity < 0 or positivity > 1
