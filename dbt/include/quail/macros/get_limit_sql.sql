{#- `dbt show` and data tests run their SELECT straight on DuckDB: AI SQL is executed by quail
    first and shown (or tested) from its result. A data test without AI calls is SQL that dbt's
    (DuckDB) macros wrote, so it is left untranslated. -#}
{% macro quail__get_limit_sql(sql, limit) -%}
  {%- if execute -%}
    {%- set is_test = model is mapping and model.get('resource_type') == 'test' -%}
    {%- set sql = adapter.quail_model_sql(sql, quail_config_dialect(), quail_node_name(), not is_test) -%}
  {%- endif -%}
  {{ return(default__get_limit_sql(sql, limit)) }}
{%- endmacro %}
