"""The seed and the AI view model both AI-view test files build."""

REVIEWS = """id,review_text
1,I love this blender. It works perfectly and makes great smoothies.
2,Terrible kettle. It broke after two days and leaks water everywhere.
3,Fantastic headphones with amazing sound. Best purchase this year.
"""

AI_VIEW = """
{{ config(materialized='view', quail_dialect='databricks') }}
select id, ai_classify(review_text, ARRAY('positive', 'negative')) as sentiment
from {{ ref('reviews') }}
"""
