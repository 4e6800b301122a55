"""Snowflake's FLATTEN as Databricks' and BigQuery's own unnesting of a JSON array.

sqlglot reads `LATERAL FLATTEN(input => v) f` and `TABLE(FLATTEN(input => v)) f` as an explode
and writes them back as `LATERAL EXPLODE(input => v)` / `TABLE(EXPLODE(input => v))`, which
neither warehouse parses. Each becomes the target's idiom with the FLATTEN columns the query
reads (https://docs.snowflake.com/en/sql-reference/functions/flatten):

- Databricks: `LATERAL VIEW [OUTER] explode(from_json(<json>, 'array<string>')) f AS value`,
  posexplode (`f AS index, value`) where INDEX is read
  (https://docs.databricks.com/aws/en/sql/language-manual/sql-ref-syntax-qry-select-lateral-view);
  an element is its string, or the JSON text of a number, object or list;
- BigQuery: `UNNEST(JSON_QUERY_ARRAY(<json>)) AS f [WITH OFFSET AS f_index]`, a LEFT JOIN for
  OUTER, the element a JSON value named by the FLATTEN's alias (`f.value` is `f`)
  (https://cloud.google.com/bigquery/docs/reference/standard-sql/json_functions#json_query_array).

An AI call answering a list (a multi-label `AI_CLASSIFY(...):labels`) is unnested as it is. Both
idioms unnest arrays: KEY, PATH, THIS and SEQ (an object's field names, Snowflake's paths, the
input itself, the input row's number) have no spelling there, so a query reading one is refused,
naming it, and an OBJECT input gives no rows (a warning says so).
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from quail_engine.sql.call import fragment
from quail_engine.sql.dialects.common import TEXT_TYPES
from quail_engine.sql.emit.common import warn
from quail_engine.sql.errors import ArgumentError, UnsupportedError
from quail_engine.sql.flatten import UNNAMED, arguments, flag_arg, text_arg
from quail_engine.sql.ir import AiOp

TARGETS = ("databricks", "bigquery")
COLUMNS = ("seq", "key", "path", "index", "value", "this")
SPELLED = ("index", "value")  # the columns an unnested array has in both targets
_SOURCE = "snowflake"


@dataclasses.dataclass
class _Flatten:
    node: exp.Expr  # what sqlglot read the FLATTEN as: a Lateral, TableFromRows or Unnest
    name: str  # its alias, UNNAMED without one
    array: exp.Expr  # the input, its path applied
    is_list: bool  # an AI call answering a list, not JSON
    is_outer: bool


def write_flatten(tree: exp.Expr, ops: dict[str, AiOp], write: str) -> None:
    """Rewrite, in place, each FLATTEN of a Snowflake statement into `write`'s unnesting
    (`ops`: call token -> its operator, to tell an AI call's list from JSON)."""
    if write not in TARGETS:
        return
    for select in list(tree.find_all(exp.Select)):
        found = [f for n in _sources(select) if (f := _read(n, ops, write)) is not None]
        for flatten in found:
            columns = _columns(select, flatten.name, write, is_only=len(found) == 1)
            has_index = any(c.name.lower() == "index" for c in columns)
            if write == "databricks":
                _databricks(select, flatten, has_index)
            else:
                _bigquery(select, flatten, columns, has_index)


def _sources(select: exp.Select) -> list[exp.Expr]:
    source = select.args.get("from_") or select.args.get("from")
    joins = [j.this for j in select.args.get("joins") or ()]
    return ([source.this] if source is not None else []) + joins


def _read(node: exp.Expr, ops: dict[str, AiOp], write: str) -> _Flatten | None:
    """`node` as a FLATTEN, or None. The parser already reads a FLATTEN of a multi-label
    AI_CLASSIFY(...):labels as UNNEST(<call>) AS f(value) (dialects/snowflake.py)."""
    alias = node.args.get("alias")
    name = alias.name if alias is not None and alias.name else UNNAMED
    if isinstance(node, exp.Unnest):
        columns = [c.lower() for c in node.alias_column_names] if alias else []
        array = node.expressions[0] if len(node.expressions) == 1 else None
        if columns != ["value"] or not _is_list(array, ops):
            return None
        return _Flatten(node, name, array, is_list=True, is_outer=False)
    if not (isinstance(node, exp.Lateral | exp.TableFromRows) and isinstance(
            node.this, exp.Explode) and not node.args.get("view")):
        return None
    args = arguments(node.this, node)
    array, is_list = args["input"], _is_list(args["input"], ops)
    mode = (text_arg(args.get("mode"), "mode", node) or "BOTH").upper()
    if mode not in ("BOTH", "ARRAY", "OBJECT"):
        raise ArgumentError(f"FLATTEN mode must be 'OBJECT', 'ARRAY' or 'BOTH', not {mode!r}",
                            fragment(node, _SOURCE), _SOURCE)
    if mode == "OBJECT":
        raise UnsupportedError(f"FLATTEN(mode => 'OBJECT') cannot be written in {write}: it "
                               "unnests arrays, not an object's fields",
                               fragment(node, _SOURCE), _SOURCE)
    if mode == "BOTH" and not is_list:
        warn("FLATTEN", write, "written as an unnesting of a JSON array: an "
             "OBJECT input gives no rows there (Snowflake gives its fields)")
    path = text_arg(args.get("path"), "path", node)
    if path and not is_list:
        array = exp.JSONExtract(this=array, expression=Dialect.get_or_raise(
            _SOURCE).to_json_path(exp.Literal.string(path)))
    return _Flatten(node, name, array, is_list,
                    flag_arg(args.get("outer"), "outer", node))


def _is_list(array: exp.Expr | None, ops: dict[str, AiOp]) -> bool:
    op = ops.get(array.name) if isinstance(array, exp.Anonymous) else None
    return op is not None and op.output_type == "VARCHAR[]"


def _columns(select: exp.Select, name: str, write: str, is_only: bool) -> list[exp.Column]:
    """The FLATTEN columns `select` reads of the FLATTEN `name`: qualified by its alias, or
    unqualified where it is the select's one FLATTEN or has no alias. One that neither target
    can spell (KEY, PATH, THIS, SEQ, or all of them through `*`) is refused."""
    is_bare = is_only or name == UNNAMED
    found = []
    for column in select.find_all(exp.Column):
        table = column.table.lower()
        if table == name.lower() or (is_bare and not table and column.name.lower() in COLUMNS
                                     and column.find_ancestor(exp.Select) is select):
            found.append(column)
    for column in found:
        if isinstance(column.this, exp.Star) or column.name.lower() not in SPELLED:
            what = "*" if isinstance(column.this, exp.Star) else column.name.upper()
            raise UnsupportedError(f"FLATTEN's {what} column cannot be written in {write}: its "
                                   "unnesting of a JSON array gives the elements and positions "
                                   "(VALUE, INDEX), not an object's KEY, PATH, THIS or SEQ; "
                                   "read VALUE and INDEX only",
                                   fragment(column, _SOURCE), _SOURCE)
    if any(isinstance(p, exp.Star) for p in select.expressions):
        raise UnsupportedError("FLATTEN's columns read by * include KEY, PATH, THIS and SEQ, "
                               f"which {write} cannot write; name VALUE and INDEX",
                               fragment(select, _SOURCE), _SOURCE)
    return found


def _databricks(select: exp.Select, flatten: _Flatten, has_index: bool) -> None:
    """`LATERAL VIEW [OUTER] [pos]explode(<array>) f AS [index,] value`; the columns keep their
    names. The FROM's own FLATTEN (no table before it) is the generator in FROM."""
    array = flatten.array
    if not flatten.is_list:
        if isinstance(array, exp.ParseJSON):  # from_json reads the JSON text itself
            array = array.this
        array = exp.Anonymous(this="from_json", expressions=[
            array, exp.Literal.string("array<string>")])
    table = exp.to_identifier(flatten.name) if flatten.name != UNNAMED else None
    join = flatten.node.parent
    if not isinstance(join, exp.Join):
        flatten.node.replace(exp.Unnest(
            expressions=[array], offset=exp.to_identifier("index") if has_index else None,
            alias=exp.TableAlias(this=table, columns=[exp.to_identifier("value")])))
        return
    _refuse_later_reads(select, join, flatten.name)
    columns = ["index", "value"] if has_index else ["value"]
    view = exp.Lateral(this=(exp.Posexplode if has_index else exp.Explode)(this=array),
                       view=True, outer=flatten.is_outer,
                       alias=exp.TableAlias(this=table,
                                            columns=[exp.to_identifier(c) for c in columns]))
    join.pop()
    select.append("laterals", view)


def _refuse_later_reads(select: exp.Select, join: exp.Join, name: str) -> None:
    """A LATERAL VIEW follows all of FROM's tables: a later join's ON cannot read it."""
    joins = select.args.get("joins") or []
    for later in joins[joins.index(join) + 1:]:
        on = later.args.get("on")
        if on is not None and any(c.table.lower() == name.lower()
                                  for c in on.find_all(exp.Column)):
            raise UnsupportedError(f"FLATTEN {name} is read by a later join's ON, which "
                                   "Databricks' LATERAL VIEW (after all of FROM) cannot be; "
                                   "move the FLATTEN after that join", fragment(later, _SOURCE),
                                   _SOURCE)


def _bigquery(select: exp.Select, flatten: _Flatten, columns: list[exp.Column],
              has_index: bool) -> None:
    """`UNNEST(<array>) AS f [WITH OFFSET AS f_index]`; `f.value` is `f` (`value` when the
    FLATTEN has no alias), `f.index` `f_index`, a bare projection keeping its column name."""
    array = flatten.array
    if not flatten.is_list:  # a path read is JSON_QUERY_ARRAY's own path argument
        array = exp.Anonymous(this="JSON_QUERY_ARRAY", expressions=[
            array.this, array.expression] if isinstance(array, exp.JSONExtract) else [array])
    is_named = flatten.name != UNNAMED
    element = flatten.name if is_named else "value"
    offset = f"{flatten.name}_index" if is_named else "index"
    join = flatten.node.parent if isinstance(flatten.node.parent, exp.Join) else None
    flatten.node.replace(exp.Unnest(
        expressions=[array], offset=exp.to_identifier(offset) if has_index else None,
        alias=exp.TableAlias(columns=[exp.to_identifier(element)])))
    if join is not None and flatten.is_outer:
        join.set("side", "LEFT")
        join.set("kind", None)
    for column in columns:
        is_value = column.name.lower() == "value"
        read: exp.Expr = exp.column(element if is_value else offset)
        parent = column.parent
        if is_value and not flatten.is_list and isinstance(parent, exp.Cast) and \
                parent.to.this in TEXT_TYPES:  # a JSON string's text, without its quotes
            parent.replace(exp.Anonymous(this="JSON_VALUE", expressions=[read]))
            continue
        if parent is select and read.name != column.name.lower():
            read = exp.alias_(read, column.name)
        column.replace(read)
