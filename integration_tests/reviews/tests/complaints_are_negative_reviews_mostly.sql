-- A filter that lets everything through (or nothing) is broken: complaints must be a strict,
-- non-empty subset of the reviews.
select count(*) as num_complaints
from {{ ref('sf_complaints') }}
having count(*) = 0 or count(*) = (select count(*) from {{ ref('reviews') }})
