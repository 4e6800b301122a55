{#- Views run on DuckDB as they are read: translate their SQL to DuckDB. A model with AI calls
    never gets here as a view (materializations/view.sql builds it as a table). -#}
{% macro quail__create_view_as(relation, sql) -%}
  {%- if execute -%}
    {%- set sql = adapter.quail_view_sql(sql, quail_config_dialect()) -%}
  {%- endif -%}
  {{ return(duckdb__create_view_as(relation, sql)) }}
{%- endmacro %}
