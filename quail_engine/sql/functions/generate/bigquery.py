"""BigQuery's spellings of ai_generate: AI.GENERATE and its typed forms
(https://cloud.google.com/bigquery/docs/reference/standard-sql/bigqueryml-syntax-ai-generate;
with an output_schema it is an extraction, with GENERATE_BOOL a filter), read and written."""

from __future__ import annotations

import json

from sqlglot import exp

from quail_engine.sql import shapes
from quail_engine.sql.build import Built, make
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects import bigquery as bq
from quail_engine.sql.dialects.common import text_input
from quail_engine.sql.emit import bigquery as bq_sql
from quail_engine.sql.emit.common import lit, task_prefix, warn
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import AiOp, OpKind
from quail_engine.sql.literals import labels, schema_fields, string
from quail_engine.sql.response_schema import SchemaError, landing_type

BIGQUERY_GENERATIVE = ("endpoint", "model_params", "connection_id", "request_type")
BIGQUERY_TYPED = {"BIGINT": "AI.GENERATE_INT", "DOUBLE": "AI.GENERATE_DOUBLE"}


def schema_fields_typed(schema: str, call: Call) -> tuple[tuple[str, str, exp.DataType], ...]:
    """Each output_schema field's name, type as written and the DuckDB type it lands as (also
    AI.GENERATE_TABLE's, sql/tvf.py)."""
    try:
        return tuple((name, kind, landing_type(kind, bq.NAME))
                     for name, kind in schema_fields(schema, call))
    except SchemaError as exc:
        raise ArgumentError(f"{call.name}: {exc}", call.sql(bq.NAME), bq.NAME) from None


def output_columns(fields: tuple[tuple[str, str, exp.DataType], ...]
                   ) -> list[tuple[str, exp.Expr]]:
    """The columns an output_schema gives, around the extraction's JSON answer (the shape's
    slot): each field as its type (`ARRAY<STRING>` a VARCHAR[], `STRUCT<...>` a STRUCT),
    `full_response` the answer, and `status` why the answer or a field is NULL ('' when none
    is). AI.GENERATE packs them in its STRUCT, AI.GENERATE_TABLE adds them to its input's
    columns; both built as trees from the schema's fields."""
    answer = shapes.slot()
    values = [(name, kind, shapes.typed(answer, to, name)) for name, kind, to in fields]
    failures = [shapes.unconverted(answer, value, kind, name) for name, kind, value in values
                if not isinstance(value, exp.JSONExtractScalar)]  # a string always converts
    status = exp.Coalesce(this=shapes.no_answer(answer, bq.NAME), expressions=[
        exp.Anonymous(this="concat_ws", expressions=[exp.Literal.string("; "), *failures])
        if failures else exp.Literal.string("")])
    return [*((n, v) for n, _, v in values), ("full_response", answer.copy()),
            ("status", status)]


def _bigquery_struct(fields: tuple[tuple[str, str, exp.DataType], ...]) -> exp.Expr:
    """AI.GENERATE's result under output_schema: its `output_columns` as one STRUCT."""
    return exp.Struct(expressions=[
        exp.PropertyEQ(this=exp.to_identifier(n, quoted=n not in ("full_response", "status")),
                       expression=v)
        for n, v in output_columns(fields)])


def build_bigquery(call: Call, output_type: str = "VARCHAR") -> Built:
    a = bind(call, Signature(("prompt",), 1, (*BIGQUERY_GENERATIVE, "output_schema")), bq.NAME)
    prompt = text_input(a["prompt"], call.name, bq.NAME)
    if a.get("output_schema") is not None:
        schema = string(a["output_schema"], "output_schema", call.name, bq.NAME)
        fields = schema_fields_typed(schema, call)
        built = make(OpKind.AI_EXTRACT, prompt, call, options=bq.read_options(a, call),
                     labels=labels(exp.Array(expressions=[exp.Literal.string(n)
                                                          for n, _, _ in fields]),
                                   call.name, bq.NAME),
                     task_args=(("output_schema", schema),))
        built.shape = _bigquery_struct(fields)
        return built
    op = OpKind.AI_FILTER if output_type == "BOOLEAN" else OpKind.AI_GENERATE
    return make(op, prompt, call, shape="result_struct", options=bq.read_options(a, call),
                output_type=output_type)

def _bigquery_params(op: AiOp) -> str:
    g = op.options.gen
    config = {k: v for k, v in (("maxOutputTokens", g.max_tokens), ("temperature", g.temperature),
                                ("topP", g.top_p), ("stopSequences", list(g.stop) or None))
              if v is not None}
    if not config:
        return ""
    return f", model_params => JSON {lit(json.dumps({'generationConfig': config}), bq_sql.NAME)}"


def emit_bigquery(op: AiOp, args: list[str]) -> str:
    prefix = task_prefix(op)
    if op.task is not None:
        warn(f"ai_{op.task}", bq_sql.NAME, "spelled as AI.GENERATE with an instruction prefix")
    fn = BIGQUERY_TYPED.get(op.output_type, "AI.GENERATE")
    return (f"{fn}({bq_sql.prompt_sql(op, args, prefix)}{bq_sql.endpoint(op)}"
            f"{_bigquery_params(op)}).result")
