"""BigQuery table functions (ML.GENERATE_TEXT, AI.GENERATE_TEXT, AI.GENERATE_TABLE) as a map over
their input relation: the TVF becomes a subquery that selects the input's columns plus the
vendor's output columns computed from `quail_ai_<id>(prompt)`:

    ML.GENERATE_TEXT(MODEL m, TABLE t, STRUCT(TRUE AS flatten_json_output)) AS g
    -> (SELECT *, quail_ai_0(prompt) AS ml_generate_text_llm_result,
               NULL AS ml_generate_text_rai_result, '' AS ml_generate_text_status
        FROM t AS __quail_in_0) AS g
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from quail_engine.sql import shapes
from quail_engine.sql.build import Built, make
from quail_engine.sql.call import Call, fragment
from quail_engine.sql.errors import (
    ArgumentError,
    UnknownAiFunctionError,
    UnsupportedPositionError,
)
from quail_engine.sql.functions.generate.bigquery import output_columns, schema_fields_typed
from quail_engine.sql.ir import Binding, Label, OpKind, Options
from quail_engine.sql.literals import gen_params, gen_spelling, options
from quail_engine.sql.placeholder import placeholder_call
from quail_engine.sql.prompt import Prompt
from quail_engine.sql.validate import Site, known_keys

# the documented fields of each function's parameter STRUCT (ai-functions.md A.2)
TEXT_KEYS = ("max_output_tokens", "top_k", "top_p", "temperature", "flatten_json_output",
             "stop_sequences", "ground_with_google_search", "safety_settings", "request_type",
             "model_params")
TABLE_KEYS = ("output_schema", "max_output_tokens", "top_p", "temperature", "stop_sequences",
              "safety_settings", "request_type")
# a column's value: a shapes template over the call (`{v}`), a tree holding `shapes.slot()` or
# a constant node
NULL_JSON = exp.cast(exp.null(), exp.DataType.build("JSON", dialect="duckdb"))
EMPTY = exp.Literal.string("")
TEXT_COLUMNS = {
    "ML.GENERATE_TEXT/flat": (("ml_generate_text_llm_result", "{v}"),
                              ("ml_generate_text_rai_result", NULL_JSON),
                              ("ml_generate_text_status", EMPTY)),
    "ML.GENERATE_TEXT": (("ml_generate_text_result", "json_object('candidates', json_array("
                          "json_object('content', json_object('parts', json_array(json_object("
                          "'text', {v}))))))"),
                         ("ml_generate_text_status", EMPTY)),
    "AI.GENERATE_TEXT": (("result", "{v}"), ("full_response", NULL_JSON), ("status", EMPTY)),
}


def input_alias(op_id: int) -> str:
    return f"__quail_in_{op_id}"


def lower_table_functions(tree: exp.Expr, dialect: str) -> list[Built]:
    """Replace each TVF in `tree` by its map subquery; ids are 0.. in order of appearance."""
    out: list[Built] = []
    if dialect != "bigquery":
        return out
    for node in list(tree.find_all(exp.GenerateText, exp.GenerateTable)):
        table = node.parent
        is_table = isinstance(node, exp.GenerateTable)
        kind = "GENERATE_TABLE" if is_table else "GENERATE_TEXT"
        if not isinstance(table, exp.Table):
            raise UnsupportedPositionError(f"{kind} is a table function: call it in FROM",
                                           fragment(table or node, dialect), dialect)
        prefix = table.args["db"].name.upper() if table.args.get("db") else "ML"
        name = f"{prefix}.{kind}"
        if not isinstance(node.expression, exp.Table | exp.Subquery):
            raise ArgumentError(f"{name} takes (MODEL m, TABLE t or (query)[, STRUCT(...)])",
                                fragment(table, dialect), dialect)
        struct = node.args.get("params_struct")
        params = options(struct if isinstance(struct, exp.Expr) else None, "the parameter STRUCT",
                         name, dialect)
        op_id = len(out)
        origin = fragment(table, dialect)
        call = Call(name=name, node=table, dialect=dialect)
        known_keys(Site(name, origin, dialect), "the parameter STRUCT", params,
                   TABLE_KEYS if is_table else TEXT_KEYS)
        prompt = Prompt("{0}", (exp.column("prompt"),))
        call.spelled.update(gen_spelling(params))  # (messages: the STRUCT's field names)
        opts = Options(model=fragment(node.this, dialect).replace("`", ""),
                       gen=gen_params(params))
        if is_table:
            schema = params.get("output_schema")
            if not isinstance(schema, str) or not schema.strip():
                raise ArgumentError(f"{name} needs output_schema (a string) in its STRUCT",
                                    origin, dialect)
            fields = schema_fields_typed(schema, call)
            one = make(OpKind.AI_EXTRACT, prompt, call, options=opts,
                       labels=tuple(Label(f[0]) for f in fields),
                       task_args=(("output_schema", schema),))
            # the schema's columns typed, full_response JSON, status '' or the problem: as
            # AI.GENERATE's STRUCT under the same output_schema
            columns = output_columns(fields)
        else:
            one = make(OpKind.AI_GENERATE, prompt, call, options=opts)
            key = name + ("/flat" if name.startswith("ML.") and params.get("flatten_json_output")
                          else "")
            if key not in TEXT_COLUMNS:
                raise UnknownAiFunctionError(f"unknown table function {name} in {dialect}",
                                             origin, dialect)
            columns = list(TEXT_COLUMNS[key])
        alias = table.alias or name.split(".")[1].lower()
        binding = Binding(0, "prompt", alias=input_alias(op_id), column="prompt",
                          node=exp.column("prompt"))
        one.op = dataclasses.replace(one.op, context="select", origin=origin, bindings=(binding,))
        one.extra["tvf"] = True
        table.replace(_map_subquery(node.expression, op_id, columns, alias))
        out.append(one)
    return out


def _map_subquery(source: exp.Expr, op_id: int, columns, alias: str) -> exp.Subquery:
    if isinstance(source, exp.Subquery):
        source = source.this
    if isinstance(source, exp.Table):
        inner = source.copy()
        inner.set("alias", exp.TableAlias(this=exp.to_identifier(input_alias(op_id))))
    else:
        inner = exp.Subquery(this=source, alias=exp.TableAlias(
            this=exp.to_identifier(input_alias(op_id))))
    selects: list[exp.Expr] = [exp.Star()]
    for name, template in columns:
        call = placeholder_call(op_id, [exp.column("prompt")])
        value = shapes.wrap(template, call)
        selects.append(exp.alias_(value, name))
    select = exp.Select(expressions=selects).from_(inner)
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias)))
