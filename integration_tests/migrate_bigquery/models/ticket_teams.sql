-- Route each ticket to a team (BigQuery AI.CLASSIFY).
select
    id,
    AI.CLASSIFY(ticket_text, categories => ['billing', 'technical', 'account']) as team
from {{ ref('tickets') }}
