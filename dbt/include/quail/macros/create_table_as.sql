{#- Every SQL materialization (table, incremental, external) writes through create_table_as:
    route the model's SQL through quail here, then let dbt-duckdb build the table as usual. -#}
{% macro quail__create_table_as(temporary, relation, compiled_code, language='sql', partitioned_by=none, sorted_by=none) -%}
  {%- if language == 'sql' and execute -%}
    {%- set compiled_code = adapter.quail_model_sql(compiled_code, quail_config_dialect(), quail_node_name()) -%}
  {%- endif -%}
  {{ return(duckdb__create_table_as(temporary, relation, compiled_code, language, partitioned_by=partitioned_by, sorted_by=sorted_by)) }}
{%- endmacro %}
