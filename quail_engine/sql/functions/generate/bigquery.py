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
from quail_engine.sql.ir import AiOp, OpKind
from quail_engine.sql.literals import labels, schema_fields, string

BIGQUERY_GENERATIVE = ("endpoint", "model_params", "connection_id", "request_type")
BIGQUERY_TYPES = {"STRING": "VARCHAR", "INT64": "BIGINT", "FLOAT64": "DOUBLE", "BOOL": "BOOLEAN",
                  "NUMERIC": "DOUBLE"}
BIGQUERY_TYPED = {"BIGINT": "AI.GENERATE_INT", "DOUBLE": "AI.GENERATE_DOUBLE"}


def _bigquery_schema(schema: str, call: Call) -> tuple[tuple[str, str], ...]:
    return tuple((name, BIGQUERY_TYPES.get(kind.upper(), "JSON"))
                 for name, kind in schema_fields(schema, call))


def _duckdb_type(name: str) -> exp.DataType:
    return exp.DataType.build(name, dialect="duckdb")


def _bigquery_struct(fields: tuple[tuple[str, str], ...]) -> exp.Expr:
    """AI.GENERATE's result under output_schema, around the extraction's JSON answer (the
    shape's slot): `struct_pack("<field>" := CAST(v->>'<field>' AS <type>), ...,
    full_response := v, status := '')`, built as a tree from the schema's fields."""
    def read(name: str, type_: str) -> exp.Expr:
        path = exp.JSONPath(expressions=[exp.JSONPathRoot(), exp.JSONPathKey(this=name)])
        return exp.Cast(this=exp.JSONExtractScalar(this=shapes.slot(), expression=path,
                                                   only_json_types=False, scalar_only=False),
                        to=_duckdb_type(type_).copy())
    return exp.Struct(expressions=[
        *(exp.PropertyEQ(this=exp.to_identifier(n, quoted=True), expression=read(n, t))
          for n, t in fields),
        exp.PropertyEQ(this=exp.to_identifier("full_response"), expression=shapes.slot()),
        exp.PropertyEQ(this=exp.to_identifier("status"), expression=exp.Literal.string(""))])


def build_bigquery(call: Call, output_type: str = "VARCHAR") -> Built:
    a = bind(call, Signature(("prompt",), 1, (*BIGQUERY_GENERATIVE, "output_schema")), bq.NAME)
    prompt = text_input(a["prompt"], call.name, bq.NAME)
    if a.get("output_schema") is not None:
        schema = string(a["output_schema"], "output_schema", call.name, bq.NAME)
        fields = _bigquery_schema(schema, call)
        built = make(OpKind.AI_EXTRACT, prompt, call, options=bq.read_options(a, call),
                     labels=labels(exp.Array(expressions=[exp.Literal.string(n)
                                                          for n, _ in fields]),
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
    if {"response_format", "responseFormat"} & set(dict(op.task_args)):
        warn("ai_generate", bq_sql.NAME, "the response format is dropped (AI.GENERATE takes an "
             "output_schema of its own)")
    fn = BIGQUERY_TYPED.get(op.output_type, "AI.GENERATE")
    return (f"{fn}({bq_sql.prompt_sql(op, args, prefix)}{bq_sql.endpoint(op)}"
            f"{_bigquery_params(op)}).result")
