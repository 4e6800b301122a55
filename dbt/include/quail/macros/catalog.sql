{#- dbt-duckdb's catalog, plus each AI model's last run as table stats (dbt docs shows them in
    the model page's Details): rows, prompts, tokens, seconds, speed of light, model, plan.
    The runs are recorded in main._quail_ai_runs of the model's database (adapters/quail/ai_runs.py). -#}
{% macro quail__get_catalog(information_schema, schemas) -%}
  {% set query %}
    with tables as (
      {{ duckdb__get_catalog_tables_sql(information_schema) }}
      {{ duckdb__get_catalog_schemas_where_clause_sql(schemas) }}
    ),
    columns as (
      {{ duckdb__get_catalog_columns_sql(information_schema) }}
      {{ duckdb__get_catalog_schemas_where_clause_sql(schemas) }}
    )
    {{ quail_catalog_results_sql(information_schema) }}
  {% endset %}
  {{ return(run_query(query)) }}
{%- endmacro %}


{% macro quail__get_catalog_relations(information_schema, relations) -%}
  {% set query %}
    with tables as (
      {{ duckdb__get_catalog_tables_sql(information_schema) }}
      {{ duckdb__get_catalog_relations_where_clause_sql(relations) }}
    ),
    columns as (
      {{ duckdb__get_catalog_columns_sql(information_schema) }}
      {{ duckdb__get_catalog_relations_where_clause_sql(relations) }}
    )
    {{ quail_catalog_results_sql(information_schema) }}
  {% endset %}
  {{ return(run_query(query)) }}
{%- endmacro %}


{% macro quail_catalog_results_sql(information_schema) -%}
  {%- set runs = adapter.quail_ai_runs_table(information_schema.database) -%}
  {%- if runs is none -%}
    {{ duckdb__get_catalog_results_sql() }}
  {%- else -%}
    {%- set stats = [
      ('quail_ai_rows', 'AI rows', "format('{} rows', r.rows_affected)", 'Rows the AI statement produced in the last run'),
      ('quail_ai_prompts', 'AI prompts', "format('{} run, {} from cache', r.prompts_run, r.cache_hits)", 'AI calls answered by the model and from the answer cache'),
      ('quail_ai_tokens', 'AI tokens', "format('{} fresh of {} requested', r.fresh_tokens, r.requested_tokens)", 'Tokens the model read (shared prefixes once) of those its prompts hold'),
      ('quail_ai_seconds', 'AI seconds', "format('{} s (model load {} s)', round(r.seconds, 2), round(r.load_seconds, 2))", 'Wall time of the AI statement, model load included'),
      ('quail_ai_sol', 'AI speed of light', "format('{} s on {}', round(r.sol_seconds, 4), r.device)", 'Time the same work takes at the device peak'),
      ('quail_ai_model', 'AI model', "coalesce(nullif(r.ai_model, ''), 'none (all answers cached)')", 'The model that answered'),
      ('quail_ai_run_at', 'AI run at', "r.run_at", 'When the table was last built by dbt-quail'),
      ('quail_ai_plan', 'AI plan', "r.plan", 'The executor plan of the last run'),
    ] -%}
    select
        tables.table_database,
        tables.table_schema,
        tables.table_name,
        tables.table_type,
        tables.table_comment,
        columns.column_name,
        columns.column_index,
        columns.column_type,
        columns.column_comment,
        null as table_owner
        {%- for id, label, value, description in stats %},
        '{{ label }}' as "stats:{{ id }}:label",
        ({{ value }})::varchar as "stats:{{ id }}:value",
        '{{ description }}' as "stats:{{ id }}:description",
        (r.table_name is not null) as "stats:{{ id }}:include"
        {%- endfor %}
    from tables
    join columns using (table_database, table_schema, table_name)
    left join {{ runs }} r
      on r.schema_name = tables.table_schema and r.table_name = tables.table_name
    order by tables.table_schema, tables.table_name, columns.column_index
  {%- endif -%}
{%- endmacro %}
