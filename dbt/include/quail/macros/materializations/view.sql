{#- A view that calls AI functions is built as a table, with a warning. DuckDB evaluates a view
    each time it is read, and the AI functions exist only inside a dbt-quail process: every other
    reader of the database (the duckdb CLI, Python, a BI tool) would fail on it, and every read
    would run the model again. Other views are dbt's own view materialization. -#}
{%- materialization view, adapter='quail' -%}
  {%- if adapter.quail_is_ai_sql(sql, quail_config_dialect()) -%}
    {%- do exceptions.warn(model.unique_id ~ " calls AI functions, so it is built as a table, "
        ~ "not a view: AI functions run only inside dbt, and a view would be evaluated by "
        ~ "whoever reads it. Set materialized='table' on it to silence this warning.") -%}
    {{ return(materialization_table_duckdb()) }}
  {%- endif -%}
  {{ return(materialization_view_default()) }}
{%- endmaterialization -%}
