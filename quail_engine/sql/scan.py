"""Per-relation scan queries of a core: projection and predicate pushdown, each scan a DuckDB
query tree built from the statement's nodes."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from sqlglot import exp

from quail_engine.sql.ir import AiOp, Binding, binding_column, key_column
from quail_engine.sql.relation import Relation
from quail_engine.sql.sources import alias_of, is_inner, join_of


@dataclass
class Pending:
    """A core being assembled (see cores.py)."""

    select: exp.Select
    sources: dict[str, exp.Expr]
    ops: list[AiOp]
    filters: list[int] = field(default_factory=list)
    joins: list[int] = field(default_factory=list)
    projections: list[int] = field(default_factory=list)
    aggregates: list[int] = field(default_factory=list)
    relational: list[tuple[exp.Expr, exp.Join | None, str | None]] = field(default_factory=list)
    keys: list[tuple[int, tuple[str, exp.Expr], tuple[str, exp.Expr]]] = field(default_factory=list)
    semi: dict[str, exp.Expr] = field(default_factory=dict)


def is_literal(b: Binding) -> bool:
    """A constant argument (`PROMPT('... {1}?', review, 'delivery')`): it reads no relation, so
    the scan of the op's first relation carries it, one value a row."""
    return b.alias is None and b.column is None and isinstance(b.node, exp.Literal | exp.Boolean)


def is_string_literal(b: Binding) -> bool:
    """A constant string argument (`'delivery'`), by the node the front end parsed."""
    return is_literal(b) and b.node.is_string


def scan_relation(p: Pending, alias: str) -> Relation:
    """The relation `alias` of core `p`: its scan built as a tree from the statement's nodes
    (copies of the bindings, equality sides, pushed-down conjuncts and the CTEs they read),
    and the DuckDB text written from it once."""
    columns: list[tuple[str, exp.Expr]] = []
    for op_id in dict.fromkeys([*p.filters, *p.joins, *p.projections, *p.aggregates]):
        op = p.ops[op_id]
        for b in op.bindings:
            if b.alias == alias or (is_literal(b) and op.aliases[:1] == (alias,)):
                columns.append((binding_column(op_id, b.index), b.node))
    for n, left, right in p.keys:
        for side_alias, side in (left, right):
            if side_alias == alias:
                columns.append((key_column(n), side))
    if not columns:
        columns.append(("_row", exp.Literal.number(1)))
    source = p.sources[alias].copy()
    # an unaliased derived table (`FROM (SELECT ...)`, legal in Snowflake and DuckDB) has the
    # alias '': DuckDB needs a name for it, and nothing in the scan refers to it by name
    source.set("alias", exp.TableAlias(this=exp.to_identifier(alias or "_quail_derived")))
    scan = exp.Select(expressions=[exp.Alias(this=e.copy(), alias=exp.to_identifier(c))
                                   for c, e in columns], from_=exp.From(this=source))
    conds = [c.copy() for c, join, default in p.relational
             if _pushable(p, c, join, default, alias)]
    if conds:
        scan.set("where", exp.Where(this=conds[0] if len(conds) == 1 else functools.reduce(
            lambda a, b: exp.And(this=a, expression=b), [exp.Paren(this=c) for c in conds])))
    ctes = _ctes_needed(p.select, [p.sources[alias], *(c for c, _, _ in p.relational)])
    if ctes:
        scan.set("with_", exp.With(expressions=ctes))
    return Relation(alias, scan.sql(dialect="duckdb"), tuple(c for c, _ in columns), scan=scan)


def _null_supplying(select: exp.Select, alias: str) -> bool:
    own = join_of(select, alias)
    if own is not None and (own.side or "").upper() in ("LEFT", "FULL"):
        return True
    joins = list(select.args.get("joins") or ())
    start = joins.index(own) + 1 if own is not None else 0
    return any((j.side or "").upper() in ("RIGHT", "FULL") for j in joins[start:])


def _pushable(p: Pending, c: exp.Expr, join: exp.Join | None, default: str | None,
              alias: str) -> bool:
    if not _reads_only(p, c, default, alias):
        return False
    if alias in p.semi:
        return True
    if join is None or is_inner(join):
        return not _null_supplying(p.select, alias)
    return (join.side or "").upper() == "LEFT" and alias_of(join.this) == alias


_NESTED = (exp.Subquery, exp.Select, exp.Exists)


def _reads_only(p: Pending, c: exp.Expr, default: str | None, alias: str) -> bool:
    """True when conjunct `c` reads no relation of the core but `alias`, so it can run in that
    relation's scan. Subqueries are allowed when they are uncorrelated or correlated with `alias`
    alone (dbt's incremental `id > (select max(id) from {{ this }})`, `NOT EXISTS (...)`); the
    scan keeps the alias name, so a reference to it inside the subquery still binds to it."""
    outer = [n for n in c.walk(prune=lambda n: n is not c and isinstance(n, _NESTED))
             if not (n is not c and isinstance(n, _NESTED))]
    if any(isinstance(n, exp.AggFunc | exp.Window) for n in outer):
        return False
    tables = {col.table or default for col in outer if isinstance(col, exp.Column)}
    if not tables <= {alias} or (not tables and not c.find(*_NESTED)):
        return False
    others = set(p.sources) - {alias}
    for sub in c.find_all(*_NESTED):
        inner = {t.alias_or_name for t in sub.find_all(exp.Table)}
        if any(col.table in others and col.table not in inner for col in sub.find_all(exp.Column)):
            return False
    return True


def _ctes_needed(select: exp.Select, nodes: list[exp.Expr]) -> list[exp.CTE]:
    """Copies of the CTEs visible to `select` that `nodes` read, directly or through another,
    in written order."""
    visible: dict[str, exp.CTE] = {}
    node: exp.Expr | None = select
    while node is not None:
        with_ = node.args.get("with_") if isinstance(node, exp.Query) else None
        for cte in (with_.expressions if with_ else ()):
            visible.setdefault(cte.alias_or_name, cte)
        node = node.parent
    wanted: set[str] = set()
    todo = [t.name for n in nodes for t in n.find_all(exp.Table)]
    while todo:
        name = todo.pop()
        if name in visible and name not in wanted:
            wanted.add(name)
            todo += [t.name for t in visible[name].this.find_all(exp.Table)]
    order = list(visible)
    return [visible[n].copy() for n in sorted(wanted, key=order.index)]
