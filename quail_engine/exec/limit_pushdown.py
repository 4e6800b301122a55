"""LIMIT reaches the AI operators: `SELECT <AI projections> FROM t [WHERE ...] LIMIT n` answers
only the rows the LIMIT keeps.

DuckDB evaluates a projection on a whole vector (up to 2,048 rows) before its LIMIT cuts, so a
generate query with LIMIT 5 would prompt for every row. The statement is rewritten so the LIMIT
applies first: the FROM relation becomes `(SELECT * FROM t AS a WHERE ... LIMIT n) AS a` and the
select list (AI calls included) runs over those rows only. A row-wise `SELECT ... FROM (<inner>)
LIMIT n` with no WHERE or ORDER BY of its own (dbt show's wrapper, a model's outer projection)
pushes its LIMIT into `<inner>` first. The limit is also returned, for the planner to place
in the core's plan (plan/row_limit.py: the filters stop once they have found enough rows).

Applies to one relation with no GROUP BY, DISTINCT, HAVING, window or aggregate, and an ORDER
BY (if any) on columns of the relation, not on the select list's aliases: the ORDER BY then goes
inside with the LIMIT (and stays outside). Without ORDER BY, DuckDB keeps insertion order, so
"the first n rows that pass" is the same set for the executor's scan and for the rewritten
statement, and the executor may stop its filters there (`RowLimit.is_ordered` False); with one,
every filter must run, and only the projections are left to the n rows. Where the executor's
rows and DuckDB's differ, the rows are still right: a row the executor did not precompute is
answered on the fly.
"""

from __future__ import annotations

from sqlglot import exp

from quail_engine.plan.row_limit import RowLimit
from quail_engine.sql.nesting import deep_stack


def push_limit(tree: exp.Expression) -> tuple[exp.Expression, RowLimit | None]:
    """(statement, limit): a rewritten copy of the statement `tree` and its row limit, or `tree`
    itself and None when the shape does not allow it."""
    with deep_stack():  # the front end reads nesting up to its limit; so must this
        out, limit = _push(tree.copy())
        return (out, limit) if limit is not None else (tree, None)


def _literal_limit(select: exp.Select) -> int | None:
    node = select.args.get("limit")
    if node is None or select.args.get("offset") is not None:
        return None
    value = node.expression if isinstance(node, exp.Limit) else None
    if isinstance(value, exp.Literal) and value.is_int and int(value.name) >= 0:
        return int(value.name)
    return None


def _is_plain(select: exp.Select) -> bool:
    blocked = ("group", "having", "distinct", "qualify", "windows", "with", "joins", "laterals")
    if any(select.args.get(k) for k in blocked):
        return False
    if select.find(exp.Window, exp.AggFunc) is not None:
        return False
    order = select.args.get("order")
    if order is None:
        return True
    aliases = {e.alias for e in select.expressions if e.alias}
    for key in order.expressions:
        columns = list(key.find_all(exp.Column))
        if not columns or any(c.name in aliases and not c.table for c in columns):
            return False
        if key.find(exp.Anonymous) is not None:
            return False
    return True


def _push(tree: exp.Expression) -> tuple[exp.Expression, RowLimit | None]:
    if not isinstance(tree, exp.Select):
        return tree, None
    limit = _literal_limit(tree)
    if limit is None or not _is_plain(tree):
        return tree, None
    source = tree.args.get("from_")
    relation = source.this if source is not None else None
    if isinstance(relation, exp.Subquery) and isinstance(relation.this, exp.Select):
        if tree.args.get("where") or tree.args.get("order"):
            return tree, None  # the outer rows are then not the inner query's first n
        inner = relation.this
        if inner.args.get("limit") is not None:
            return tree, None
        pushed, inner_limit = _push(inner.limit(limit, copy=True))
        if inner_limit is None:
            return tree, None
        relation.set("this", pushed)
        return tree, inner_limit
    if not isinstance(relation, exp.Table):
        return tree, None
    alias = relation.alias_or_name
    inner = exp.select("*").from_(relation.copy())
    where = tree.args.get("where")
    if where is not None:
        inner.set("where", where.copy())
    order = tree.args.get("order")
    if order is not None:
        inner.set("order", order.copy())
    inner = inner.limit(limit)
    out = tree.copy()
    out.set("where", None)
    out.set("limit", None)
    out.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(
        this=exp.to_identifier(alias)))))
    return out, RowLimit(limit, order is not None)

