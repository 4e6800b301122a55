"""Snowflake's `FLATTEN` table function in DuckDB SQL.

`LATERAL FLATTEN(input => v [, path => 'a.b'] [, outer => TRUE] [, mode => 'ARRAY'])` (and
`TABLE(FLATTEN(...))`) gives one row per element of an ARRAY or field of an OBJECT, with the
columns KEY (an object's field name, NULL for an array), PATH, INDEX (an array's 0-based position,
NULL for an object), VALUE (the element, a VARIANT) and THIS (the value flattened); a scalar, a
NULL or an empty container gives no row, or with OUTER one row of NULLs
(https://docs.snowflake.com/en/sql-reference/functions/flatten). sqlglot writes it for DuckDB as
an UNNEST with named arguments, which DuckDB cannot parse. Here it becomes a lateral subquery over
DuckDB's `json_each` with those columns, VALUE and THIS typed JSON (DuckDB's VARIANT), for a run
and for a transpile into DuckDB (into Databricks and BigQuery: emit/flatten.py). The multi-label
`AI_CLASSIFY(...):labels` form is an UNNEST of the labels already (dialects/snowflake.py) and is
not seen here.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from quail_engine.sql.call import fragment
from quail_engine.sql.dialects.common import TEXT_TYPES
from quail_engine.sql.errors import ArgumentError, UnsupportedError

NAME = "snowflake"
MODES = {"BOTH": ("ARRAY", "OBJECT"), "ARRAY": ("ARRAY",), "OBJECT": ("OBJECT",)}
JSON_COLUMNS = ("value", "this")
UNNAMED = "_flattened"  # sqlglot's alias of a FLATTEN written without one

# The columns as Snowflake documents them, computed from json_each's (whose `key` is an array's
# position as text, and whose `fullkey`/`path` are JSON paths, not Snowflake's). The input is
# evaluated once, in its own derived table, so an AI call in it is read once per row (its answers
# computed by the core beforehand: sql/lateral_calls.py).
_TEMPLATE = """
SELECT
  CASE WHEN json_type(quail_flatten_input.this) = 'OBJECT' THEN quail_flatten_each.key END AS key,
  :prefix || CASE WHEN json_type(quail_flatten_input.this) = 'ARRAY'
                  THEN '[' || quail_flatten_each.key || ']'
                  WHEN regexp_matches(quail_flatten_each.key, '^[A-Za-z_][A-Za-z0-9_]*$')
                  THEN :dot || quail_flatten_each.key
                  ELSE '[''' || quail_flatten_each.key || ''']' END AS path,
  CASE WHEN json_type(quail_flatten_input.this) = 'ARRAY'
       THEN CAST(quail_flatten_each.key AS BIGINT) END AS index,
  quail_flatten_each.value AS value,
  quail_flatten_input.this AS this
FROM (SELECT :input AS this) AS quail_flatten_input,
     json_each(quail_flatten_input.this) AS quail_flatten_each
WHERE json_type(quail_flatten_input.this) IN :modes
"""
_OUTPUT = ("key", "path", "index", "value", "this")
_ARGS = ("input", "path", "outer", "recursive", "mode")


def lower_flatten(tree: exp.Expr) -> None:
    """Replace, in place, every FLATTEN of a Snowflake statement by its DuckDB subquery, and
    read its VALUE/THIS columns as Snowflake does where they are cast to text (`f.value::string`
    is the string without JSON quotes) or subscripted (`f.value[0]` counts from 0)."""
    for node in list(tree.find_all(exp.Lateral, exp.TableFromRows)):
        explode = node.this
        if not isinstance(explode, exp.Explode) or node.args.get("view"):
            continue
        args = arguments(explode, node)
        alias = node.args.get("alias")
        name = alias.name if alias is not None and alias.name else UNNAMED
        _refuse_seq(tree, name, node)
        query = _subquery(args, node)
        is_outer = flag_arg(args.get("outer"), "outer", node)
        join = node.parent if isinstance(node.parent, exp.Join) else None
        sub = exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(name)))
        if join is None:
            node.replace(sub)
        else:
            join.set("this", exp.Lateral(this=sub))
            if is_outer:
                join.set("side", "LEFT")
                join.set("kind", None)
            join.set("on", exp.true())
        _read_columns(tree, name, is_named=name != UNNAMED)


def arguments(explode: exp.Explode, node: exp.Expr) -> dict[str, exp.Expr]:
    """FLATTEN's arguments by name (`input` the one positional form)."""
    out: dict[str, exp.Expr] = {}
    for position, arg in enumerate([explode.this, *explode.expressions]):
        if isinstance(arg, exp.Kwarg):
            key = arg.this.name.lower()
            if key not in _ARGS:
                raise ArgumentError(f"FLATTEN has no argument {arg.this.name!r} (it takes "
                                    f"{', '.join(_ARGS)})", fragment(node, NAME), NAME)
            out[key] = arg.expression
        elif position == 0:
            out["input"] = arg
        else:
            raise ArgumentError("FLATTEN takes its arguments after the input by name "
                                "(path => ..., outer => ..., mode => ...)",
                                fragment(node, NAME), NAME)
    if "input" not in out:
        raise ArgumentError("FLATTEN needs input => <value>", fragment(node, NAME), NAME)
    if flag_arg(out.get("recursive"), "recursive", node):
        raise UnsupportedError("FLATTEN(recursive => TRUE) is not supported: flatten each "
                               "level with its own LATERAL FLATTEN", fragment(node, NAME), NAME)
    return out


def _subquery(args: dict[str, exp.Expr], node: exp.Expr) -> exp.Select:
    value: exp.Expr = exp.cast(args["input"].copy(), exp.DataType.build("JSON"))
    path = text_arg(args.get("path"), "path", node)
    if path:
        # Snowflake's path `a.b[0]` is the JSON path `$.a.b[0]`
        step = path if path.startswith("[") else f".{path}"
        value = exp.JSONExtract(this=value, expression=exp.Literal.string(f"${step}"))
    mode = (text_arg(args.get("mode"), "mode", node) or "BOTH").upper()
    if mode not in MODES:
        raise ArgumentError(f"FLATTEN mode must be 'OBJECT', 'ARRAY' or 'BOTH', not {mode!r}",
                            fragment(node, NAME), NAME)
    query = sqlglot.parse_one(_TEMPLATE, read="duckdb")
    return exp.replace_placeholders(
        query, input=value, prefix=exp.Literal.string(path),
        dot=exp.Literal.string("." if path else ""),
        modes=exp.Tuple(expressions=[exp.Literal.string(m) for m in MODES[mode]]))


def _refuse_seq(tree: exp.Expr, name: str, node: exp.Expr) -> None:
    """SEQ numbers the input rows, which a derived table of one row does not see: a query that
    reads it is refused rather than answered with made-up numbers."""
    for column in tree.find_all(exp.Column):
        if column.name.lower() == "seq" and column.table.lower() == name.lower():
            raise UnsupportedError("FLATTEN's SEQ column is not supported (its other columns "
                                   "are: KEY, PATH, INDEX, VALUE, THIS)",
                                   fragment(node, NAME), NAME)


def _read_columns(tree: exp.Expr, name: str, *, is_named: bool) -> None:
    """`f.value::string` is the text of a string element in Snowflake, where DuckDB's cast of a
    JSON string keeps its quotes: it becomes `f.value ->> '$'`. `f.value[0]` counts from 0 as a
    JSON path step (sqlglot would write DuckDB's 1-based list subscript). An unnamed FLATTEN's
    columns are written unqualified (`value`)."""
    tables = {name.lower()} if is_named else {name.lower(), ""}
    for column in list(tree.find_all(exp.Column)):
        if column.table.lower() not in tables or column.name.lower() not in JSON_COLUMNS:
            continue
        parent = column.parent
        if isinstance(parent, exp.Cast) and parent.to.this in TEXT_TYPES:
            parent.replace(exp.JSONExtractScalar(this=column.copy(),
                                                 expression=exp.Literal.string("$")))
        elif isinstance(parent, exp.Bracket) and len(parent.expressions) == 1:
            index = parent.expressions[0]
            if isinstance(index, exp.Literal) and not index.is_string and index.this.isdigit():
                parent.replace(exp.JSONExtract(this=column.copy(),
                                               expression=exp.Literal.string(f"$[{index.this}]")))


def flag_arg(node: exp.Expr | None, what: str, call: exp.Expr) -> bool:
    """FLATTEN's boolean argument `what` (False when absent)."""
    if node is None:
        return False
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    raise ArgumentError(f"FLATTEN {what} must be TRUE or FALSE", fragment(call, NAME), NAME)


def text_arg(node: exp.Expr | None, what: str, call: exp.Expr) -> str:
    """FLATTEN's string argument `what` ('' when absent)."""
    if node is None:
        return ""
    if isinstance(node, exp.Literal) and node.is_string:
        return node.this
    raise ArgumentError(f"FLATTEN {what} must be a string literal", fragment(call, NAME), NAME)
