"""ai_embed: a vector per text. Read and written, refused when run (quail has no embedding
model: OpSpec.refusal).

Snowflake AI_EMBED and EMBED_TEXT_768/1024
(https://docs.snowflake.com/en/sql-reference/functions/ai_embed), BigQuery AI.EMBED
(https://cloud.google.com/bigquery/docs/reference/standard-sql/bigqueryml-syntax-ai-embed),
DuckDB ai_embed; Databricks has none (only ai_query against an embedding endpoint).
"""

from __future__ import annotations

import dataclasses

from quail_engine.sql.build import Built, make
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects import bigquery as bq
from quail_engine.sql.dialects import duckdb as ddb
from quail_engine.sql.dialects import snowflake as sf
from quail_engine.sql.dialects.common import text_input
from quail_engine.sql.emit import bigquery as bq_sql
from quail_engine.sql.emit import databricks as dbx_sql
from quail_engine.sql.emit import duckdb as ddb_sql
from quail_engine.sql.emit import snowflake as sf_sql
from quail_engine.sql.emit.common import lit, warn
from quail_engine.sql.ir import AiOp, OpKind, Options
from quail_engine.sql.literals import string

KINDS = (OpKind.AI_EMBED,)


def _build_snowflake(call: Call) -> Built:
    a = bind(call, Signature(("model", "input"), 2), sf.NAME)
    return make(OpKind.AI_EMBED, text_input(a["input"], call.name, sf.NAME), call,
                options=Options(model=string(a["model"], "the model", call.name, sf.NAME)))


def _build_snowflake_text(call: Call) -> Built:
    built = _build_snowflake(call)
    dim = call.name.rsplit("_", 1)[-1]
    return dataclasses.replace(built, op=dataclasses.replace(built.op,
                                                             task_args=(("dimensions", dim),)))


def _build_bigquery(call: Call) -> Built:
    a = bind(call, Signature(("content",), 1, ("endpoint", "connection_id", "task_type",
                                                "title", "model_params")), bq.NAME)
    return make(OpKind.AI_EMBED, text_input(a["content"], call.name, bq.NAME), call,
                shape="result_struct", options=bq.read_options(a, call))


def _emit_snowflake(op: AiOp, args: list[str]) -> str:
    model = op.options.model or sf_sql.DEFAULT_EMBED
    if op.options.model is None:
        warn("AI_EMBED", sf_sql.NAME, f"AI_EMBED needs a model; using {sf_sql.DEFAULT_EMBED!r}")
    return f"AI_EMBED({lit(model, sf_sql.NAME)}, {sf_sql.prompt_sql(op, args)})"


def _emit_bigquery(op: AiOp, args: list[str]) -> str:
    return f"AI.EMBED({bq_sql.prompt_sql(op, args)}{bq_sql.endpoint(op)}).result"


PARSE = {
    "snowflake": {
        "AI_EMBED": _build_snowflake,
        sf.CORTEX + "EMBED_TEXT_768": _build_snowflake_text,
        sf.CORTEX + "EMBED_TEXT_1024": _build_snowflake_text,
    },
    "bigquery": {"AI.EMBED": _build_bigquery},
    "databricks": {},
    "duckdb": {"AI_EMBED": ddb.unary(OpKind.AI_EMBED, 1)},
}
EMIT = {
    "snowflake": _emit_snowflake,
    "bigquery": _emit_bigquery,
    "databricks": dbx_sql.refused("ai_embed", "Databricks has no embedding function (only "
                                  "ai_query against an embedding endpoint)"),
    "duckdb": ddb_sql.prompt_call,
}
# `quail migrate`'s words for the refusal (docs/migrate.md), in place of OpSpec.refusal's
REFUSAL_NOTE = ("Quail ships no embedding model: ai_embed is refused when the query is read; "
                "no rewrite (compute embeddings outside the model)")
