"""Databricks' `from_json(jsonStr, schema)` in DuckDB SQL.

Databricks reads the JSON text into the type a Spark DDL string names (`'array<string>'`,
`'struct<a: string, n: int>'`, `'map<string, int>'`, or a field list `'a STRING, n INT'`, a
struct); a malformed text is NULL, a missing field or an element of another type is NULL, extra
fields are ignored (https://docs.databricks.com/aws/en/sql/language-manual/functions/from_json).
DuckDB's `from_json` takes a JSON structure instead, so the Spark string failed as "Malformed
JSON". Here it becomes `TRY(json_transform(jsonStr, <structure>))`, whose lenient reading is
Databricks' (and TRY its NULL for malformed text); the result is a DuckDB list, struct or map, so
sqlglot's shift of a Databricks 0-based subscript to DuckDB's 1-based one holds. A schema with no
DuckDB counterpart is refused, quoting it. Only the run is lowered: transpile keeps from_json.
"""

from __future__ import annotations

import json

from sqlglot import exp
from sqlglot.errors import ParseError

from quail_engine.sql.call import fragment
from quail_engine.sql.errors import ArgumentError, UnsupportedError

NAME = "databricks"
D = exp.DType
TEXT = (D.TEXT, D.VARCHAR, D.CHAR, D.NCHAR, D.NVARCHAR)
SCALARS = (D.TINYINT, D.SMALLINT, D.INT, D.BIGINT, D.FLOAT, D.DOUBLE, D.DECIMAL, D.BOOLEAN,
           D.DATE, D.TIMESTAMP, D.TIMESTAMPTZ, D.TIMESTAMPNTZ)


def lower_from_json(tree: exp.Expr) -> None:
    """Replace, in place, every from_json of a Databricks statement by json_transform."""
    for node in list(tree.find_all(exp.FromJson)):
        if node.args.get("options") is not None:
            raise UnsupportedError("from_json options are not supported (a malformed text is "
                                   "NULL, as in Databricks' default PERMISSIVE mode)",
                                   fragment(node, NAME), NAME)
        schema = node.expression
        if not (isinstance(schema, exp.Literal) and schema.is_string):
            raise ArgumentError("from_json needs its schema as a string literal",
                                fragment(node, NAME), NAME)
        structure = json.dumps(_structure(_read(schema.this, node), schema.this, node))
        node.replace(exp.Try(this=exp.Anonymous(
            this="json_transform", expressions=[node.this.copy(), exp.Literal.string(structure)])))


def _read(text: str, node: exp.Expr) -> exp.DataType:
    """The Spark type of `text`; a bare field list (`a INT, b STRING`) is a struct of them."""
    for spelling in (text, f"struct<{text}>"):
        try:
            dtype = exp.DataType.build(spelling, dialect=NAME)
        except (ParseError, ValueError):
            continue
        if dtype.this != D.STRUCT or dtype.expressions:  # (sqlglot reads struct<foo<bar>> empty)
            return dtype
    raise _refused(text, "it is no Spark type", node)


def _structure(dtype: exp.DataType, text: str, node: exp.Expr):
    """json_transform's structure of `dtype`: a list for an array, an object for a struct, the
    DuckDB type's name for a map or a scalar."""
    kind = dtype.this
    if kind == D.ARRAY:
        return [_structure(dtype.expressions[0], text, node)]
    if kind == D.STRUCT:
        return {col.name: _structure(col.args["kind"], text, node) for col in dtype.expressions}
    if kind == D.MAP:
        key, value = dtype.expressions
        if key.this not in TEXT:
            raise _refused(text, "a JSON object's keys are strings", node)
        _structure(value, text, node)
        return f"MAP(VARCHAR, {value.sql('duckdb')})"
    if kind in TEXT:
        return "VARCHAR"
    if kind in SCALARS:
        return dtype.sql("duckdb")
    raise _refused(text, f"{dtype.sql(NAME)} has no JSON reading in DuckDB", node)


def _refused(text: str, why: str, node: exp.Expr) -> UnsupportedError:
    return UnsupportedError(f"from_json schema {text!r} has no DuckDB type: {why} (quail reads "
                            "array, struct and map<string, ...> of strings, numbers, booleans, "
                            "dates, timestamps)", fragment(node, NAME), NAME)
