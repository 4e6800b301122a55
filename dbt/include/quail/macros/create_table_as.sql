{#- Every SQL materialization (table, incremental, external) writes through create_table_as:
    route the model's SQL through quail here, then let dbt-duckdb build the table as usual.
    Snapshots wrap the user's SELECT in dbt's own (DuckDB) SQL, so theirs is not translated.
    A model passes its relation (`this`): its AI work is recorded for `dbt docs generate`. -#}
{% macro quail__create_table_as(temporary, relation, compiled_code, language='sql', partitioned_by=none, sorted_by=none) -%}
  {%- if language == 'sql' and execute -%}
    {%- set translate = model.get('resource_type') in ('model', 'unit_test') if model is mapping else true -%}
    {%- set model_relation = this if model is mapping and model.get('resource_type') == 'model' else none -%}
    {%- set compiled_code = adapter.quail_model_sql(compiled_code, quail_config_dialect(), quail_node_name(), translate, model_relation) -%}
  {%- endif -%}
  {{ return(duckdb__create_table_as(temporary, relation, compiled_code, language, partitioned_by=partitioned_by, sorted_by=sorted_by)) }}
{%- endmacro %}
