{#- Views run on DuckDB as they are read: translate their SQL, and let their AI calls go to the
    AI functions registered inside DuckDB. -#}
{% macro quail__create_view_as(relation, sql) -%}
  {%- if execute -%}
    {%- set sql = adapter.quail_view_sql(sql, quail_config_dialect()) -%}
  {%- endif -%}
  {{ return(duckdb__create_view_as(relation, sql)) }}
{%- endmacro %}
