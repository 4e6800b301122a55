"""Snowflake Cortex AISQL -> IR: what every Snowflake AI function shares (the sqlglot dialect,
`return_error_details`, the `SNOWFLAKE.CORTEX.` names, result wrappers). Each function's builder
is in quail_engine/sql/functions/<kind>.py.

Docs: https://docs.snowflake.com/en/user-guide/snowflake-cortex/aisql
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp
from sqlglot.dialects.snowflake import Snowflake
from sqlglot.generators.snowflake import SnowflakeGenerator
from sqlglot.parsers.snowflake import SnowflakeParser

from quail_engine.sql.build import Built
from quail_engine.sql.call import Call
from quail_engine.sql.dialects.common import (
    climb_json,
    untyped_ai,
)
from quail_engine.sql.literals import flag

NAME = "snowflake"
CORTEX = "SNOWFLAKE.CORTEX."


class QuailSnowflake(Snowflake):
    class Parser(SnowflakeParser):
        FUNCTIONS = untyped_ai(SnowflakeParser.FUNCTIONS)

        def _parse_type(self, *args, **kwargs):
            """`TYPE OBJECT(a STRING, ...)`: AI_COMPLETE's response_format as a SQL type
            (https://docs.snowflake.com/en/sql-reference/functions/ai_complete-single-string)."""
            if (self._curr and self._curr.text.upper() == "TYPE" and self._next
                    and self._next.text.upper() in ("OBJECT", "ARRAY", "MAP")):
                self._advance()
                return self._parse_types()
            return super()._parse_type(*args, **kwargs)

        def _parse_lateral(self):
            """`LATERAL FLATTEN(input => AI_CLASSIFY(...):labels) f`: the labels unnested, one
            row each, `f.value` the label (https://docs.snowflake.com/en/sql-reference/functions/
            flatten); sqlglot's FLATTEN over DuckDB is no SQL DuckDB reads."""
            lateral = super()._parse_lateral()
            return _flattened_labels(lateral) or lateral

    class Generator(SnowflakeGenerator):
        def datatype_sql(self, expression: exp.DataType) -> str:
            """A type passed as an argument keeps its `TYPE` keyword, so it reads back."""
            text = super().datatype_sql(expression)
            if isinstance(expression.parent, exp.Kwarg | exp.Anonymous):
                return f"TYPE {text}"
            return text


def _flattened_labels(lateral: exp.Expr | None) -> exp.Unnest | None:
    """`lateral` as an UNNEST of an AI call's `:labels` array with the one FLATTEN column it
    has, `value` (None: any other FLATTEN, left as sqlglot reads it)."""
    explode = lateral.this if isinstance(lateral, exp.Lateral) else None
    if not isinstance(explode, exp.Explode):
        return None
    arg = explode.this
    if isinstance(arg, exp.Kwarg):
        if arg.this.name.lower() != "input":
            return None
        arg = arg.expression
    call = arg.this if isinstance(arg, exp.JSONExtract) else None
    if not (isinstance(call, exp.Anonymous) and is_ai_name(call.name.upper())
            and climb_json(call) == (arg, "labels", False)):
        return None
    alias = lateral.args.get("alias")
    name = alias.this if alias is not None and alias.this else exp.to_identifier("_flattened")
    return exp.Unnest(expressions=[arg],
                      alias=exp.TableAlias(this=name, columns=[exp.to_identifier("value")]))


def read_on_error(args: dict, call: Call, default: str = "null") -> tuple[str, str | None]:
    """(on_error, shape) of a call's `return_error_details`: TRUE answers a {value, error}
    object (shape value_error_object) instead of NULL on an error row."""
    if flag(args.get("return_error_details"), "return_error_details", call):
        return "details", "value_error_object"
    return default, None


def compose(outer: str | None, inner: str | None) -> str | None:
    """One shape name for `outer` packaged around `inner` (`outer+inner`; either may be None)."""
    return "+".join(s for s in (outer, inner) if s) or None


# vendor function name -> builder(Call) -> Built, filled by quail_engine.sql.functions
FUNCTIONS: dict = {}

# shape -> {JSON path -> Wrapper}, filled by quail_engine.sql.functions
WRAPPERS: dict = {}


def lookup(name: str):
    """The builder for a function name, or None. `SNOWFLAKE.CORTEX.AI_X` means `AI_X`."""
    if name.startswith(CORTEX) and name[len(CORTEX):].startswith("AI_"):
        name = name[len(CORTEX):]
    return FUNCTIONS.get(name)


def is_ai_name(name: str) -> bool:
    return name.startswith(("AI_", CORTEX))


def unwrap(built: Built, node: exp.Expr) -> tuple[exp.Expr, str | None, Built]:
    """Strip `:labels[0]::STRING`, `:label`, `:response`, ... around a call."""
    table = WRAPPERS.get(built.shape or "")
    climbed = climb_json(node) if table else None
    if not climbed or climbed[1] not in table:
        return node, None, built
    outer, path, has_cast = climbed
    w = table[path]
    text = f"{NAME}:{path.replace('.', ':')}" + ("::STRING" if has_cast else "")
    return outer, text, dataclasses.replace(built, op=dataclasses.replace(built.op, wrapper=text),
                                            shape=w.shape)

