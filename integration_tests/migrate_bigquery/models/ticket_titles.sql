-- A short title for each ticket (BigQuery AI.GENERATE, a struct whose .result is the text).
select
    id,
    AI.GENERATE(
        ('Write a title of at most five words for this support ticket: ', ticket_text),
        endpoint => 'gemini-2.5-flash',
        model_params => JSON '{"generation_config": {"max_output_tokens": 10}}'
    ).result as title
from {{ ref('tickets') }}
