"""ai_generate: free text (or a typed value) decoded from a prompt, and the task functions
that are a generation (summarize, translate, fix grammar, mask).

Snowflake AI_COMPLETE, COMPLETE / TRY_COMPLETE (a conversation), AI_TRANSLATE / TRANSLATE,
SUMMARIZE (https://docs.snowflake.com/en/sql-reference/functions/ai_complete); BigQuery
AI.GENERATE and its typed forms (https://cloud.google.com/bigquery/docs/reference/standard-sql/
bigqueryml-syntax-ai-generate; with an output_schema it is an extraction, with GENERATE_BOOL a
filter); Databricks ai_query, ai_gen, ai_summarize, ai_translate, ai_mask, ai_fix_grammar
(https://docs.databricks.com/aws/en/large-language-models/ai-functions); DuckDB ai_generate.

Each vendor's builders and emitter are in its module here (snowflake.py, bigquery.py,
databricks.py); this module holds the tables sql/functions/__init__.py merges, with DuckDB's
entries, and the decoding notes.
"""

from __future__ import annotations

from quail_engine.sql.dialects import duckdb as ddb
from quail_engine.sql.dialects import snowflake as sf
from quail_engine.sql.emit import duckdb as ddb_sql
from quail_engine.sql.functions.generate.bigquery import build_bigquery, emit_bigquery
from quail_engine.sql.functions.generate.databricks import (
    build_databricks,
    build_databricks_mask,
    build_databricks_summarize,
    build_databricks_translate,
    databricks_task,
    emit_databricks,
)
from quail_engine.sql.functions.generate.snowflake import (
    build_snowflake,
    build_snowflake_summarize,
    build_snowflake_translate,
    emit_snowflake,
)
from quail_engine.sql.ir import AiOp, OpKind

KINDS = (OpKind.AI_GENERATE,)


def decoding_notes(op: AiOp, default_max_tokens: int) -> list[str]:
    """What a decoded answer (ai_generate, and ai_extract's JSON) differs in: greedy, within
    the call's token limit (else `default_max_tokens`), sampling options ignored."""
    limit = op.options.gen.max_tokens or default_max_tokens
    notes = [f"greedy decoding, at most {limit} new tokens (the profile's max_new_tokens "
             "caps it)"]
    if op.options.gen.temperature or op.options.gen.top_p:
        notes.append("temperature and top_p are ignored")
    return notes


PARSE = {
    "snowflake": {
        "AI_COMPLETE": build_snowflake,
        "AI_TRANSLATE": build_snowflake_translate,
        sf.CORTEX + "COMPLETE": lambda call: build_snowflake(call, legacy=True),
        sf.CORTEX + "TRY_COMPLETE": lambda call: build_snowflake(call, legacy=True, try_=True),
        sf.CORTEX + "SUMMARIZE": build_snowflake_summarize,
        sf.CORTEX + "TRANSLATE": build_snowflake_translate,
    },
    "bigquery": {
        "AI.GENERATE": build_bigquery,
        "AI.GENERATE_BOOL": lambda call: build_bigquery(call, "BOOLEAN"),
        "AI.GENERATE_INT": lambda call: build_bigquery(call, "BIGINT"),
        "AI.GENERATE_DOUBLE": lambda call: build_bigquery(call, "DOUBLE"),
    },
    "databricks": {
        "AI_QUERY": build_databricks,
        "AI_SUMMARIZE": build_databricks_summarize,
        "AI_TRANSLATE": build_databricks_translate,
        "AI_MASK": build_databricks_mask,
        "AI_FIX_GRAMMAR": databricks_task("fix_grammar"),
        "AI_GEN": databricks_task(None),
    },
    "duckdb": {"AI_GENERATE": ddb.templated(OpKind.AI_GENERATE)},
}
EMIT = {
    "snowflake": emit_snowflake,
    "bigquery": emit_bigquery,
    "databricks": emit_databricks,
    "duckdb": ddb_sql.prompt_call,
}
NOTES = decoding_notes
