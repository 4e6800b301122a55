"""The WHERE and inner-join ON conjuncts of a core planned as its AI filters and joins:
`plan_conjuncts` reads the top-level AND-conjuncts (and a correlated `[NOT] EXISTS` as a semi or
anti join) into a `Pending` core, the relational ones kept for pushdown and equality keys.

A conjunct `NOT <AI predicate>` (Snowflake's `NOT AI_FILTER(...)`, Databricks' `= 'FALSE'`) is
planned like the predicate itself, with the op marked `negated`: the same prompt (so the same
answers and document KV), rows answering FALSE pass. AI predicates under OR or in an outer
join's ON stay out of `filters`/`joins`: DuckDB still evaluates them through
`quail_ai_<id>(...)` in `duckdb_sql`, they are just not planned.

A conjunct comparing a single-label classification to string literals (`= 'x'`, `<>`, `IN`,
`NOT IN`) is planned as a filter of it, its passing labels in `AiOp.pass_labels`.
"""

from __future__ import annotations

import dataclasses
import logging

from sqlglot import exp

from quail_engine.sql.ir import AiOp, JoinInfo, OpKind
from quail_engine.sql.placeholder import op_id_of
from quail_engine.sql.scan import Pending, is_literal
from quail_engine.sql.sources import is_inner, sources_of

log = logging.getLogger(__name__)


def conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    """Top-level AND-conjuncts in order (iterative: long AND chains are deep trees)."""
    out: list[exp.Expr] = []
    todo = [] if node is None else [node]
    while todo:
        node = todo.pop().unnest()
        if isinstance(node, exp.And):
            todo += [node.expression, node.this]
        else:
            out.append(node)
    return out


def plan_conjuncts(p: Pending, absorbed: set[int]) -> None:
    """Reads the WHERE and inner-join ON conjuncts of `p.select` into `p`: its AI filters and
    joins, its relational conjuncts, and a correlated `[NOT] EXISTS` as a semi (anti) join
    whose SELECT is added to `absorbed` (it is no core of its own)."""
    where = p.select.args.get("where")
    found = conjuncts(where.this if where else None)
    exists = [c for c in found if isinstance(c, exp.Exists)
              or (isinstance(c, exp.Not) and isinstance(c.this, exp.Exists))]
    for c in found:
        if not any(c is e for e in exists):
            _conjunct(p, c, None)
    for join in p.select.args.get("joins") or ():
        for c in conjuncts(join.args.get("on")):
            _conjunct(p, c, join)
    for c in exists:
        _exists(p, c, absorbed)


def _conjunct(p: Pending, c: exp.Expr, join: exp.Join | None, inner_alias: str | None = None,
              kind: str = "inner") -> None:
    c = _is_true(c)
    if inner_alias is None and is_inner(join) and _label_filter(p, c):
        return
    default = inner_alias or (next(iter(p.sources)) if len(p.sources) == 1 else None)
    negated = _negated_id(c) is not None
    op_id = _negated_id(c) if negated else _predicate_id(c)
    if op_id is not None and p.ops[op_id].output_type == "BOOLEAN" and (join is None
                                                                        or is_inner(join)):
        aliases = _aliases_in_order(p.ops[op_id], p.sources)
        if aliases is None:
            return
        if negated:
            p.ops[op_id] = dataclasses.replace(p.ops[op_id], negated=True)
        if len(aliases) == 1:
            p.filters.append(op_id)
        elif len(aliases) == 2:
            if inner_alias is not None:
                left = tuple(a for a in aliases if a != inner_alias)
                right = (inner_alias,)
            else:
                left, right = aliases[:1], aliases[1:]
            p.joins.append(op_id)
            p.ops[op_id] = dataclasses.replace(p.ops[op_id], op=OpKind.AI_JOIN,
                                               join=JoinInfo(kind, left, right))
        return
    if op_id is None and not any(op_id_of(n) is not None for n in c.find_all(exp.Anonymous)):
        p.relational.append((c, join, default))


def _label_filter(p: Pending, c: exp.Expr) -> bool:
    """Plans `<classification> = 'x'` (`<>`, `IN (...)`, `NOT IN`) as a filter: its passing
    labels, over the op's label names, in `pass_labels` (two conjuncts on one op intersect)."""
    negated = isinstance(c, exp.Not)
    node = c.this.unnest() if negated else c
    if isinstance(node, exp.In) and not any(node.args.get(k) for k in ("query", "unnest",
                                                                        "field")):
        call, lits = node.this, node.expressions
    elif isinstance(node, exp.EQ | exp.NEQ):
        call, lits = node.this, [node.expression]
        if isinstance(call, exp.Literal):
            call, lits = node.expression, [node.this]
        negated ^= isinstance(node, exp.NEQ)
    else:
        return False
    op_id = _predicate_id(call)
    if op_id is None or not lits or not all(isinstance(x, exp.Literal) and x.is_string
                                            for x in lits):
        return False
    op = p.ops[op_id]
    if op.op != OpKind.AI_CLASSIFY or op.multi or op.output_type != "VARCHAR" or not op.labels:
        return False
    aliases = _aliases_in_order(op, p.sources)
    if aliases is None or len(aliases) != 1:
        return False
    named = {x.this for x in lits}
    names = [lb.name for lb in op.labels]
    passing = [n for n in names if (n in named) != negated]
    if op.pass_labels is not None:
        passing = [n for n in passing if n in op.pass_labels]
    p.ops[op_id] = dataclasses.replace(op, pass_labels=tuple(passing))
    if op_id not in p.filters:
        p.filters.append(op_id)
    return True


def _predicate_id(c: exp.Expr) -> int | None:
    """The op id when the conjunct is a bare placeholder call (`NOT` is read by the caller)."""
    return op_id_of(c) if isinstance(c, exp.Anonymous) else None


def _negated_id(c: exp.Expr) -> int | None:
    """The op id of `NOT pred` or `NOT (pred = TRUE)` (not `NOT (pred IS TRUE)`: that one holds
    for a NULL answer, which no planned filter keeps)."""
    if not isinstance(c, exp.Not):
        return None
    inner = c.this.unnest()
    if isinstance(inner, exp.EQ):
        inner = _is_true(inner)
    return _predicate_id(inner)


def _is_true(c: exp.Expr) -> exp.Expr:
    """`pred = TRUE` and `pred IS TRUE` are `pred` as a conjunct."""
    if isinstance(c, exp.EQ | exp.Is) and isinstance(c.expression, exp.Boolean) and \
            c.expression.this and _predicate_id(c.this) is not None:
        return c.this
    return c


def _aliases_in_order(op: AiOp, sources) -> tuple[str, ...] | None:
    used = {b.alias for b in op.bindings if not is_literal(b)}
    if not used or None in used or not used <= set(sources):
        log.info("%s is not planned: its bindings do not name the core's relations", op.op)
        return None
    return tuple(a for a in sources if a in used)


def _exists(p: Pending, c: exp.Expr, absorbed: set[int]) -> None:
    is_anti = isinstance(c, exp.Not)
    query = (c.this if is_anti else c).this
    if not isinstance(query, exp.Select) or query.args.get("joins") or any(
            query.args.get(k) for k in ("group", "having", "limit", "qualify", "with_")):
        _conjunct(p, c, None)
        return
    inner = sources_of(query)
    if len(inner) != 1 or set(inner) & set(p.sources):
        _conjunct(p, c, None)
        return
    inner_alias, source = next(iter(inner.items()))
    outer_sources = p.sources
    p.sources = {**p.sources, inner_alias: source}
    before_joins, before_filters = len(p.joins), len(p.filters)
    where = query.args.get("where")
    kind = "anti" if is_anti else "semi"
    rel_before = len(p.relational)
    for conj in conjuncts(where.this if where else None):
        _conjunct(p, conj, None, inner_alias=inner_alias, kind=kind)
    new_joins = p.joins[before_joins:]
    if not new_joins:
        p.sources, p.joins, p.filters = outer_sources, p.joins[:before_joins], p.filters[:before_filters]
        del p.relational[rel_before:]
        _conjunct(p, c, None)  # a plain (NOT) EXISTS is a relational conjunct, pushable if local
        return
    p.semi[inner_alias] = source
    absorbed.add(id(query))

