"""Databricks' `explode` of an AI call's array as the target's own unnesting join.

sqlglot writes a projection `explode(<array>)` for Snowflake and BigQuery as a position join
(GENERATE_ARRAY / ARRAY_GENERATE_RANGE over the array's size, beside a second unnest of the
array) that names the array four times: around an AI call, four model calls per row. It
writes `LATERAL VIEW explode(...)` unchanged, which neither warehouse parses. Both become one
join over one call, in the idiom each warehouse documents:

- BigQuery: `CROSS JOIN UNNEST(<array>) AS label`, the element named by the alias
  (https://cloud.google.com/bigquery/docs/reference/standard-sql/query-syntax#unnest_operator);
- Snowflake: `, LATERAL FLATTEN(input => <array>) AS label`, the element `label.value`, a
  VARIANT: a list of strings (a multi-label answer) is read `::VARCHAR` as Databricks returns
  it (https://docs.snowflake.com/en/sql-reference/functions/flatten).

A row whose array is NULL or empty gives no rows, as explode does. Arrays without an AI call
are left to sqlglot.
"""

from __future__ import annotations

from sqlglot import exp

from quail_engine.sql.ir import AiOp

TARGETS = ("bigquery", "snowflake")


def unnest_calls(tree: exp.Expr, ops: dict[str, AiOp], write: str) -> None:
    """Rewrite, in place, each SELECT's explode of an array that holds a call `<token>()`
    (`ops`: token -> its operator) into `write`'s unnesting join."""
    if write not in TARGETS:
        return
    for select in list(tree.find_all(exp.Select)):
        for item in list(select.expressions):
            node = item.this if isinstance(item, exp.Alias) else item
            if _is_call_explode(node, ops):
                name = item.alias if isinstance(item, exp.Alias) else "col"  # Spark's name
                _join(select, node.this, name, write)
                item.replace(_element(name, name, node.this, ops, write, alias=True))
        for lateral in list(select.args.get("laterals") or ()):
            columns = lateral.alias_column_names if lateral.args.get("alias") else []
            if not (lateral.args.get("view") and not lateral.args.get("outer")
                    and _is_call_explode(lateral.this, ops) and len(columns) == 1):
                continue
            table, name = lateral.alias, columns[0]
            lateral.pop()
            _join(select, lateral.this.this, table or name, write, name)
            for column in list(select.find_all(exp.Column)):
                if column.name == name and column.table in ("", table):
                    column.replace(_element(table or name, name, lateral.this.this, ops, write,
                                            alias=column.parent is select))


def _is_call_explode(node: exp.Expr, ops: dict[str, AiOp]) -> bool:
    return type(node) is exp.Explode and any(
        isinstance(n, exp.Anonymous) and n.name in ops for n in node.this.walk())


def _join(select: exp.Select, array: exp.Expr, table: str, write: str,
          name: str | None = None) -> None:
    """`select` joined with the unnested `array`: BigQuery's element named `name` (default
    `table`), Snowflake's FLATTEN rows named `table`."""
    if write == "bigquery":
        alias = exp.TableAlias(columns=[exp.to_identifier(name or table)])
        source = exp.Unnest(expressions=[array.copy()], alias=alias)
        select.join(source, join_type="CROSS", copy=False)
        return
    flatten = exp.Anonymous(this="FLATTEN", expressions=[
        exp.Kwarg(this=exp.var("input"), expression=array.copy())])
    select.join(exp.Lateral(this=flatten, alias=exp.TableAlias(this=exp.to_identifier(table))),
                copy=False)


def _element(table: str, name: str, array: exp.Expr, ops: dict[str, AiOp], write: str,
             alias: bool) -> exp.Expr:
    """The element's value: BigQuery's `name` itself; Snowflake's `<table>.value`, a VARIANT,
    cast to VARCHAR where the array is a call answering a list of strings; `AS name` where it
    stands as a projection."""
    if write == "bigquery":
        return exp.column(name)
    value: exp.Expr = exp.column("value", table=table)
    op = ops.get(array.name) if isinstance(array, exp.Anonymous) else None
    if op is not None and op.output_type == "VARCHAR[]":
        value = exp.cast(value, exp.DType.VARCHAR)
    return exp.alias_(value, name) if alias else value
