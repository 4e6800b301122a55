"""Databricks AI Functions -> IR: what every Databricks AI function shares (the sqlglot dialect,
result wrappers). Each function's builder is in quail_engine/sql/functions/<kind>.py.

Docs: https://docs.databricks.com/aws/en/large-language-models/ai-functions

Databricks has no ai_filter: its yes/no idioms (`ai_classify(x, ARRAY('yes','no')) = 'yes'`,
`ai_query(ep, p) = 'TRUE'`, `ai_query(ep, p, responseFormat => 'STRUCT<m: BOOLEAN>'):m`) are
read as ai_filter in databricks_bool.py.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp
from sqlglot.dialects.databricks import Databricks
from sqlglot.generators.databricks import DatabricksGenerator
from sqlglot.parsers.databricks import DatabricksParser

from quail_engine.sql.build import Built
from quail_engine.sql.dialects.common import (
    climb_json,
    untyped_ai,
)
from quail_engine.sql.dialects.databricks_bool import read_boolean

NAME = "databricks"
def _json_value(gen: DatabricksGenerator, node: exp.Expr) -> str:
    """Databricks has no JSON_OBJECT/JSON_ARRAY (sqlglot prints an unreadable `JSON_OBJECT('k':
    v)`): a vendor result shape rebuilt here is NAMED_STRUCT/ARRAY, serialised once, at the
    top, by TO_JSON (https://docs.databricks.com/aws/en/sql/language-manual/functions/to_json)."""
    if isinstance(node, exp.JSONObject):
        items = [f"{gen.sql(kv, 'this')}, {gen.sql(kv, 'expression')}" for kv in node.expressions]
        text = f"NAMED_STRUCT({', '.join(items)})"
    else:
        text = f"ARRAY({', '.join(gen.sql(e) for e in node.expressions)})"
    inside = isinstance(node.parent, exp.JSONKeyValue | exp.JSONArray)
    return text if inside else f"TO_JSON({text})"


class QuailDatabricks(Databricks):
    class Parser(DatabricksParser):
        FUNCTIONS = untyped_ai(DatabricksParser.FUNCTIONS)

    class Generator(DatabricksGenerator):
        TRANSFORMS = {**DatabricksGenerator.TRANSFORMS, exp.JSONObject: _json_value,
                      exp.JSONArray: _json_value}


# vendor function name -> builder(Call) -> Built, filled by quail_engine.sql.functions
FUNCTIONS: dict = {}

# shape -> {JSON path -> Wrapper}, filled by quail_engine.sql.functions
WRAPPERS: dict = {}


def lookup(name: str):
    return FUNCTIONS.get(name)


def is_ai_name(name: str) -> bool:
    return name.startswith("AI_")


def unwrap(built: Built, node: exp.Expr) -> tuple[exp.Expr, str | None, Built]:
    """Strip `:response[0]`, and read the boolean idioms as ai_filter."""
    boolean = read_boolean(built, node)
    if boolean is not None:
        outer, built = boolean
        return outer, built.op.wrapper, built
    op, parent = built.op, node.parent
    if (built.shape == "result_error_struct" and isinstance(parent, exp.Dot)
            and parent.this is node and parent.expression.name.lower() == "result"):
        op = dataclasses.replace(op, wrapper=f"{NAME}:.result")
        return parent, op.wrapper, dataclasses.replace(built, op=op, shape=None)
    climbed = climb_json(node)
    if climbed is None:
        return node, None, built
    outer, path, _ = climbed
    w = WRAPPERS.get(built.shape or "", {}).get(path)
    if w is None:
        return node, None, built
    text = f"{NAME}:{path}"
    if built.op.multi and _is_array_parse(outer):
        outer, text = outer.parent, f"from_json({text}, 'array<string>')"
    return outer, text, dataclasses.replace(built, op=dataclasses.replace(op, wrapper=text),
                                            shape=w.shape)


def _is_array_parse(node: exp.Expr) -> bool:
    """`from_json(<node>, 'array<string>')`: a multi-label response read as its labels
    (https://docs.databricks.com/aws/en/sql/language-manual/functions/ai_classify, unnested with
    `explode`); the canonical value already is that array."""
    parent = node.parent
    schema = parent.expression if isinstance(parent, exp.FromJson) else None
    return (parent is not None and parent.this is node and isinstance(schema, exp.Literal)
            and schema.is_string and schema.this.replace(" ", "").lower() == "array<string>")
