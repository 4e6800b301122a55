{#- A yes/no filter on a review: is it about `topic`? The topic is the prompt's second argument. -#}
{% macro review_is_about(column, topic) -%}
AI_FILTER(PROMPT('Review: {0}\nIs this review about {1}?', {{ column }}, '{{ topic }}'))
{%- endmacro %}
