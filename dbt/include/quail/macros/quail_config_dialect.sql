{#- The node's `quail_dialect`; a unit test takes the one of the model it tests. None means the
    profile's `dialect`. -#}
{% macro quail_config_dialect() -%}
  {%- set dialect = config.get('quail_dialect') -%}
  {%- set tested = model.get('tested_node_unique_id') if model is mapping else none -%}
  {%- if dialect is none and tested and tested in graph.nodes -%}
    {%- set dialect = graph.nodes[tested].config.get('quail_dialect') -%}
  {%- endif -%}
  {{ return(dialect) }}
{%- endmacro %}

{% macro quail_node_name() -%}
  {{ return(model.get('unique_id', 'inline query') if model is mapping else 'inline query') }}
{%- endmacro %}
