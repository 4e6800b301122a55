"""BigQuery AI functions -> IR. Docs: https://cloud.google.com/bigquery/docs/reference/standard-sql/bigqueryml-syntax-ai-if

sqlglot 30.30 re-parses `AI.*` calls with its own function parsers, so `AI.IF(...)` becomes the
ordinary `IF(cond, a, b)` and `AI.AGG(x, 'i')` fails (facts.md). `QuailBigQuery` parses `AI.*`
calls as plain anonymous calls instead.
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache

from sqlglot import exp, parser
from sqlglot.dialects.bigquery import BigQuery
from sqlglot.parsers.bigquery import BigQueryParser
from sqlglot.tokens import TokenType

from quail_engine.sql import shapes
from quail_engine.sql.build import Built, make, vendor_items
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects.common import text_input, untyped_ai
from quail_engine.sql.ir import OpKind, Options
from quail_engine.sql.literals import (
    gen_params,
    labels,
    literal,
    options,
    schema_fields,
    string,
)
from quail_engine.sql.validate import Site, refuse, text

NAME = "bigquery"
MANAGED = ("connection_id", "endpoint", "examples", "embeddings", "optimization_mode",
           "max_error_ratio", "request_type")
# the documented values of the enumerated options (bigqueryml-syntax-ai-generate,
# https://cloud.google.com/bigquery/docs/optimize-ai-functions)
ENUMS = {"request_type": ("shared", "dedicated", "unspecified"),
         "optimization_mode": ("minimize_cost", "maximize_quality")}
GENERATIVE = ("endpoint", "model_params", "connection_id", "request_type")
SCHEMA_TYPES = {"STRING": "VARCHAR", "INT64": "BIGINT", "FLOAT64": "DOUBLE", "BOOL": "BOOLEAN",
                "NUMERIC": "DOUBLE"}


class QuailBigQuery(BigQuery):
    class Parser(BigQueryParser):
        FUNCTIONS = untyped_ai(BigQueryParser.FUNCTIONS)

        def _parse_column_ops(self, this: exp.Expr | None) -> exp.Expr | None:
            if (isinstance(this, exp.Column) and not this.table and this.name.upper() == "AI"
                    and self._curr and self._curr.token_type == TokenType.DOT):
                return parser.Parser._parse_column_ops(self, this)
            return super()._parse_column_ops(this)


def read_options(a: dict, call: Call) -> Options:
    endpoint = a.get("endpoint")
    ratio = a.get("max_error_ratio")
    params = options(a.get("model_params"), "model_params", call.name, NAME)
    vendor = {k: (a[k].sql(dialect=NAME) if k == "embeddings" else
                  literal(a[k], k, call.name, NAME))
              for k in ("connection_id", "optimization_mode", "request_type", "embeddings")
              if a.get(k) is not None}
    site = Site(call.name, call.sql(NAME), NAME)
    for key, choices in ENUMS.items():
        if key in vendor:
            text(site, key, vendor[key], choices)
    rest = {k: v for k, v in params.items() if k.lower() not in ("generation_config",
                                                                 "generationconfig")}
    if rest:
        vendor["model_params"] = rest
    return Options(model=None if endpoint is None else string(endpoint, "endpoint", call.name,
                                                             NAME),
                   max_error_ratio=None if ratio is None else literal(ratio, "max_error_ratio",
                                                                      call.name, NAME),
                   gen=gen_params(params), vendor=vendor_items(vendor))


def read_examples(a: dict, call: Call) -> tuple[tuple[str, str], ...]:
    if a.get("examples") is None:
        return ()
    items = literal(a["examples"], "examples", call.name, NAME)
    if not isinstance(items, list) or not all(isinstance(i, list) and len(i) == 2 for i in items):
        raise refuse(Site(call.name, call.sql(NAME), NAME), "examples",
                     "an array of (input, output) pairs", items)
    return tuple((str(i[0]), json.dumps(i[1])) for i in items)


def _schema(schema: str, call: Call) -> tuple[tuple[str, str], ...]:
    return tuple((name, SCHEMA_TYPES.get(kind.upper(), "JSON"))
                 for name, kind in schema_fields(schema, call))


@lru_cache(maxsize=16)
def _duckdb_type(name: str) -> exp.DataType:
    return exp.DataType.build(name, dialect="duckdb")


def _generated_struct(fields: tuple[tuple[str, str], ...]) -> exp.Expr:
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


def _build_generate(call: Call, output_type: str = "VARCHAR") -> Built:
    a = bind(call, Signature(("prompt",), 1, (*GENERATIVE, "output_schema")), NAME)
    prompt = text_input(a["prompt"], call.name, NAME)
    if a.get("output_schema") is not None:
        schema = string(a["output_schema"], "output_schema", call.name, NAME)
        fields = _schema(schema, call)
        built = make(OpKind.AI_EXTRACT, prompt, call, options=read_options(a, call),
                     labels=labels(exp.Array(expressions=[exp.Literal.string(n) for n, _ in fields]),
                                   call.name, NAME),
                     task_args=(("output_schema", schema),))
        built.shape = _generated_struct(fields)
        return built
    op = OpKind.AI_FILTER if output_type == "BOOLEAN" else OpKind.AI_GENERATE
    return make(op, prompt, call, shape="result_struct", options=read_options(a, call),
                output_type=output_type)


FUNCTIONS = {
    "AI.GENERATE": _build_generate,
    "AI.GENERATE_BOOL": lambda call: _build_generate(call, "BOOLEAN"),
    "AI.GENERATE_INT": lambda call: _build_generate(call, "BIGINT"),
    "AI.GENERATE_DOUBLE": lambda call: _build_generate(call, "DOUBLE"),
}


def lookup(name: str):
    return FUNCTIONS.get(name)


def is_ai_name(name: str) -> bool:
    return name.startswith("AI.")


def unwrap(built: Built, node: exp.Expr) -> tuple[exp.Expr, str | None, Built]:
    """Strip `.result` from the STRUCT the AI.GENERATE* family returns."""
    parent = node.parent
    if (built.shape == "result_struct" and isinstance(parent, exp.Dot) and parent.this is node
            and parent.expression.name.lower() == "result"):
        op = dataclasses.replace(built.op, wrapper=f"{NAME}:.result")
        return parent, op.wrapper, dataclasses.replace(built, op=op, shape=None)
    return node, None, built
