-- Urgent tickets only (BigQuery AI.IF), with how upset the customer sounds (AI.SCORE).
select
    id,
    ticket_text,
    AI.SCORE(('How upset is this customer, from 0 to 1? Ticket: ', ticket_text)) as upset
from {{ ref('tickets') }}
where AI.IF(('Does this support ticket need an answer within the hour? Ticket: ', ticket_text),
            connection_id => 'us.gemini')
