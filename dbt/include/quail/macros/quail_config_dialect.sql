{#- The node's `quail_dialect` (None means the profile's `dialect`). dbt gives a unit test
    neither the tested model's config nor custom keys of its own, so a unit test reads it from
    its `meta: {quail_dialect: ...}`, else from a `config(quail_dialect=...)` call in the tested
    model's code. -#}
{% macro quail_config_dialect() -%}
  {%- set dialect = config.get('quail_dialect') -%}
  {%- if dialect is none and model is mapping and model.get('tested_node_unique_id') -%}
    {%- set dialect = (model.get('config', {}).get('meta') or {}).get('quail_dialect') -%}
    {%- if dialect is none -%}
      {%- set found = modules.re.search("quail_dialect\s*=\s*['\"](\w+)['\"]", model.get('raw_code', '')) -%}
      {%- set dialect = found.group(1) if found else none -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(dialect) }}
{%- endmacro %}

{% macro quail_node_name() -%}
  {{ return(model.get('unique_id', 'inline query') if model is mapping else 'inline query') }}
{%- endmacro %}
