{#- `dbt show` and data tests run their SELECT straight on DuckDB: AI SQL is executed by quail
    first and shown (or tested) from its result. -#}
{% macro quail__get_limit_sql(sql, limit) -%}
  {%- if execute -%}
    {%- set sql = adapter.quail_model_sql(sql, quail_config_dialect(), quail_node_name()) -%}
  {%- endif -%}
  {{ return(default__get_limit_sql(sql, limit)) }}
{%- endmacro %}
