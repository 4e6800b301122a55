-- The semantic filter keeps a non-empty set of reviews, at least 80% of them positive by the
-- golden labels.
select count(*) as num_kept, count(*) filter (where g.sentiment = 'positive') as num_positive
from {{ ref('sf_positive_reviews') }} as p
join {{ ref('reviews_golden') }} as g using (id)
having count(*) = 0 or count(*) filter (where g.sentiment = 'positive') < 0.8 * count(*)
