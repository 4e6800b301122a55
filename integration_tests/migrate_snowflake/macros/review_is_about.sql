{#- The yes/no question every review filter asks, with the review in slot {0}. -#}
{% macro review_question(topic) -%}
'Review: {0}\nIs this review about {{ topic }}?'
{%- endmacro %}
