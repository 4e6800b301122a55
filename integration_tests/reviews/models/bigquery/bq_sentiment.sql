-- BigQuery AI: the same classification as sf_sentiment.
select
    id,
    review_text,
    AI.CLASSIFY(review_text, categories => ['positive', 'negative']) as sentiment
from {{ ref('reviews') }}
