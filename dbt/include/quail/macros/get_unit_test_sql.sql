{#- Unit tests run the model's SQL on fixture rows straight on DuckDB: quail executes the AI part
    on those rows first (in the tested model's dialect), then dbt compares as usual. -#}
{% macro quail__get_unit_test_sql(main_sql, expected_fixture_sql, expected_column_names) -%}
  {%- if execute -%}
    {%- set main_sql = adapter.quail_model_sql(main_sql, quail_config_dialect(), quail_node_name()) -%}
  {%- endif -%}
  {{ return(default__get_unit_test_sql(main_sql, expected_fixture_sql, expected_column_names)) }}
{%- endmacro %}
