"""ai_aggregate: one text per group from its rows' texts and an instruction.

Snowflake AI_AGG and AI_SUMMARIZE_AGG (https://docs.snowflake.com/en/sql-reference/functions/
ai_agg), BigQuery AI.AGG (https://cloud.google.com/bigquery/docs/reference/standard-sql/
bigqueryml-syntax-ai-agg, DISTINCT allowed), DuckDB ai_aggregate(input, 'instruction');
Databricks has no AI aggregate function.
"""

from __future__ import annotations

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
from quail_engine.sql.emit.common import lit, refuse, warn
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import AiOp, OpKind
from quail_engine.sql.literals import literal, string
from quail_engine.sql.task_prompts import DEFAULT_AGGREGATE

KINDS = (OpKind.AI_AGGREGATE,)


def _build_snowflake(call: Call) -> Built:
    a = bind(call, Signature(("expr", "instruction"), 2), sf.NAME)
    return make(OpKind.AI_AGGREGATE, text_input(a["expr"], call.name, sf.NAME), call,
                instruction=string(a["instruction"], "the instruction", call.name, sf.NAME))


def _build_snowflake_summarize(call: Call) -> Built:
    a = bind(call, Signature(("expr",), 1), sf.NAME)
    return make(OpKind.AI_AGGREGATE, text_input(a["expr"], call.name, sf.NAME), call,
                task="summarize")


def _build_bigquery(call: Call) -> Built:
    a = bind(call, Signature(("input", "instruction"), 2, ("connection_id", "endpoint")),
             bq.NAME)
    return make(OpKind.AI_AGGREGATE, text_input(a["input"], call.name, bq.NAME), call,
                instruction=string(a["instruction"], "the instruction", call.name, bq.NAME),
                task_args=(("distinct", "true"),) if call.is_distinct else (),
                options=bq.read_options(a, call))


def _build_duckdb(call: Call) -> Built:
    if len(call.args) not in (1, 2):
        raise ArgumentError(f"{call.name} takes an input and an instruction",
                            call.sql(ddb.NAME), ddb.NAME)
    opts, fields, task_args = ddb.named_args(call)
    if len(call.args) == 2:
        ddb.check_once(call, fields, "instruction")
        fields["instruction"] = literal(call.args[1], "the instruction", call.name, ddb.NAME)
    return make(OpKind.AI_AGGREGATE, ddb.read_prompt(call, call.args[:1]), call, options=opts,
                task_args=(*task_args, *((("distinct", "true"),) if call.is_distinct else ())),
                **fields)


def _emit_snowflake(op: AiOp, args: list[str]) -> str:
    if ("distinct", "true") in op.task_args:
        raise refuse("AI.AGG(DISTINCT ...)", sf_sql.NAME, "AI_AGG has no DISTINCT form", op)
    if op.instruction is None:
        return f"AI_SUMMARIZE_AGG({sf_sql.prompt_sql(op, args)})"
    return f"AI_AGG({sf_sql.prompt_sql(op, args)}, {lit(op.instruction, sf_sql.NAME)})"


def _emit_bigquery(op: AiOp, args: list[str]) -> str:
    instruction = op.instruction
    if instruction is None:
        instruction = DEFAULT_AGGREGATE
        warn("AI_SUMMARIZE_AGG", bq_sql.NAME, f"spelled as AI.AGG with the instruction "
             f"{instruction!r}")
    distinct = "DISTINCT " if ("distinct", "true") in op.task_args else ""
    return (f"AI.AGG({distinct}{bq_sql.prompt_sql(op, args)}, {lit(instruction, bq_sql.NAME)}"
            f"{bq_sql.endpoint(op)})")


def _emit_duckdb(op: AiOp, args: list[str]) -> str:
    positional = [ddb_sql.prompt_sql(op, args)]
    if op.instruction is not None:
        positional.append(lit(op.instruction, ddb_sql.NAME))
    return ddb_sql.spelled(op, positional, positional_fields=("instruction",))


def _notes(op: AiOp, default_max_tokens: int) -> list[str]:
    return ["a group past the model's context is summarized in chunks, then from the "
            "chunks' answers (map-reduce with the call's own instruction)"]


PARSE = {
    "snowflake": {"AI_AGG": _build_snowflake, "AI_SUMMARIZE_AGG": _build_snowflake_summarize},
    "bigquery": {"AI.AGG": _build_bigquery},
    "databricks": {},
    "duckdb": {"AI_AGGREGATE": _build_duckdb},
}
EMIT = {
    "snowflake": _emit_snowflake,
    "bigquery": _emit_bigquery,
    "databricks": dbx_sql.refused("ai_aggregate", "Databricks has no AI aggregate function"),
    "duckdb": _emit_duckdb,
}
NOTES = _notes
