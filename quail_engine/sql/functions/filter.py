"""ai_filter and ai_join: a yes/no question per row (per candidate pair for a join).

Snowflake AI_FILTER (https://docs.snowflake.com/en/sql-reference/functions/ai_filter), BigQuery
AI.IF (https://cloud.google.com/bigquery/docs/reference/standard-sql/bigqueryml-syntax-ai-if),
DuckDB ai_filter. Databricks has none: its yes/no idioms are read in
sql/dialects/databricks_bool.py and written here as `ai_classify(..., ARRAY('yes', 'no')) =
'yes'`. A join is a filter whose bindings span two relations, spelled as one.
"""

from __future__ import annotations

from sqlglot import exp

from quail_engine.sql.build import Built, make
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects import bigquery as bq
from quail_engine.sql.dialects import duckdb as ddb
from quail_engine.sql.dialects import snowflake as sf
from quail_engine.sql.dialects.common import append, as_file, text_input
from quail_engine.sql.emit import bigquery as bq_sql
from quail_engine.sql.emit import databricks as dbx_sql
from quail_engine.sql.emit import duckdb as ddb_sql
from quail_engine.sql.emit import snowflake as sf_sql
from quail_engine.sql.emit.common import drop_examples, lit
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import AiOp, OpKind, Options
from quail_engine.sql.literals import options

KINDS = (OpKind.AI_FILTER, OpKind.AI_JOIN)
HINT_KEYS = ("selectivity", "anchor", "order")


def _build_snowflake(call: Call) -> Built:
    a = bind(call, Signature(("input", "file", "return_error_details"), 1, ("predicate",)),
             sf.NAME)
    if "predicate" in a:
        a.setdefault("input", a.pop("predicate"))
    file = a.get("file")
    if isinstance(file, exp.Boolean):
        a["return_error_details"], file = a.pop("file"), None
    hints = {}
    if isinstance(file, (exp.Struct, exp.Map, exp.VarMap)):  # Quail's planner hints
        hints, file = _hints(file, call), None
    on_error, shape = sf.read_on_error(a, call)
    prompt = text_input(a["input"], call.name, sf.NAME)
    if file is not None:
        prompt = append(prompt, file)
    built = make(OpKind.AI_FILTER, prompt, call, shape=shape,
                 options=Options(on_error=on_error, **hints))
    return built if file is None else as_file(built, file)


def _hints(node: exp.Expr, call: Call) -> dict:
    """Quail's extension: an object as AI_FILTER's second argument holds planner hints
    (`{'selectivity': 0.1}`, `'anchor'`, `'order'`), never prompt text (Snowflake's second
    argument is a FILE; an object there was read into the prompt, silently)."""
    hints = options(node, "the planner hints", call.name, sf.NAME)
    unknown = sorted(set(hints) - set(HINT_KEYS))
    if unknown:
        raise ArgumentError(f"{call.name}: unknown planner hint {unknown[0]!r}; expected one of "
                            f"{', '.join(HINT_KEYS)}", call.sql(sf.NAME), sf.NAME)
    return hints


def _build_bigquery(call: Call) -> Built:
    a = bind(call, Signature(("prompt",), 1, bq.MANAGED), bq.NAME)
    return make(OpKind.AI_FILTER, text_input(a["prompt"], call.name, bq.NAME), call,
                options=bq.read_options(a, call), examples=bq.read_examples(a, call))


def _emit_snowflake(op: AiOp, args: list[str]) -> str:
    sf_sql.no_model("AI_FILTER", op)
    drop_examples("AI_FILTER", sf_sql.NAME, op)
    return f"AI_FILTER({sf_sql.prompt_sql(op, args)})"


def _emit_bigquery(op: AiOp, args: list[str]) -> str:
    return (f"AI.IF({bq_sql.prompt_sql(op, args)}{bq_sql.examples_sql(op)}"
            f"{bq_sql.managed('AI.IF', op)})")


def _emit_databricks(op: AiOp, args: list[str]) -> str:
    prompt = dbx_sql.prompt_sql(op, args)
    if op.options.model:
        dbx_sql.fail_on_error("ai_query", op)
        return (f"ai_query({lit(op.options.model, dbx_sql.NAME)}, {prompt}"
                f"{dbx_sql.model_params(op)}) = 'yes'")
    return f"ai_classify({prompt}, ARRAY('yes', 'no')) = 'yes'"


def _emit_duckdb(op: AiOp, args: list[str]) -> str:
    return ddb_sql.spelled(op, [ddb_sql.prompt_sql(op, args)], name=OpKind.AI_FILTER)


PARSE = {
    "snowflake": {"AI_FILTER": _build_snowflake},
    "bigquery": {"AI.IF": _build_bigquery},
    "databricks": {},
    "duckdb": {"AI_FILTER": ddb.templated(OpKind.AI_FILTER)},
}
EMIT = {
    "snowflake": _emit_snowflake,
    "bigquery": _emit_bigquery,
    "databricks": _emit_databricks,
    "duckdb": _emit_duckdb,
}
