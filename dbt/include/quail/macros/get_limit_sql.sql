{#- `dbt show` and data tests run their SELECT straight on DuckDB: AI SQL is executed by quail
    first and shown (or tested) from its result. A data test without AI calls is SQL that dbt's
    (DuckDB) macros wrote, so it is left untranslated. The limit goes inside the AI SQL (a
    subquery valid in every dialect), so quail answers only the rows the limit keeps. -#}
{% macro quail__get_limit_sql(sql, limit) -%}
  {%- if execute -%}
    {%- set is_test = model is mapping and model.get('resource_type') == 'test' -%}
    {%- set dialect = quail_config_dialect() -%}
    {%- if limit is not none and adapter.quail_is_ai_sql(sql, dialect) -%}
      {%- set sql = "select * from (\n" ~ sql ~ "\n) as quail_limit_subq limit " ~ limit -%}
    {%- endif -%}
    {%- set sql = adapter.quail_model_sql(sql, dialect, quail_node_name(), not is_test) -%}
  {%- endif -%}
  {{ return(default__get_limit_sql(sql, limit)) }}
{%- endmacro %}
