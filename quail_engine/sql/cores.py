"""Cores: the SELECT blocks that hold AI operators, with what the planner needs to precompute
their answers: the relations (each with a pushed-down scan query), the AI filters and joins that
are top-level AND-conjuncts of WHERE / inner-join ON (sql/conjuncts.py), and the AI projections.

Calls DuckDB asks of every row or group outside the select list (ORDER BY, QUALIFY, HAVING, a
WHERE call that is no conjunct of it) are the core's projections too (sql/row_calls.py). A
CTE's classification that the outer query filters on is planned inside the outer core
(sql/label_ctes.py), its ops re-bound in `Core.ops`. A call in the input of a lateral source
(`LATERAL FLATTEN(input => AI_CLASSIFY(...):labels)`, `UNNEST(AI.CLASSIFY(...))`) that reads one
of the core's relations is a projection too (sql/lateral_calls.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from quail_engine.sql.build import AGGREGATE_OPS
from quail_engine.sql.conjuncts import conjuncts, plan_conjuncts
from quail_engine.sql.ir import AiOp, Equality, JoinInfo, OpKind
from quail_engine.sql.label_ctes import see_through
from quail_engine.sql.lateral_calls import lateral_calls
from quail_engine.sql.placeholder import op_id_of
from quail_engine.sql.relation import Relation
from quail_engine.sql.row_calls import is_row_level, reads_alias, reads_one, reads_only, row_calls
from quail_engine.sql.scan import Pending, scan_relation
from quail_engine.sql.sources import is_inner, sources_of


@dataclass(frozen=True)
class EquiKey:
    """Equality conjunct `n` of ai_join `join` (`equality`, its tree; `left` is the join's
    left relation): column `k_<n>` of both sides' scans."""

    join: int
    n: int
    equality: Equality

    @property
    def left(self) -> str:
        return self.equality.left

    @property
    def right(self) -> str:
        return self.equality.right

    def to_json(self) -> dict[str, Any]:
        """`quail explain`'s form: the conjunct as its DuckDB text."""
        return {"join": self.join, "n": self.n, "left": self.left, "right": self.right,
                "sql": self.equality.sql}


@dataclass(frozen=True)
class Core:
    relations: tuple[Relation, ...]
    filters: tuple[int, ...]
    joins: tuple[int, ...]
    projections: tuple[int, ...]
    aggregates: tuple[int, ...] = ()
    keys: tuple[EquiKey, ...] = ()
    # ops this core plans differently from the statement's (a CTE's classification seen
    # through: re-bound to the outer alias, with its pass labels): (op id, op)
    ops: tuple[tuple[int, AiOp], ...] = ()

    def ops_of(self, ai_ops) -> list[AiOp]:
        """The statement's ops as this core plans them."""
        out = list(ai_ops)
        for op_id, op in self.ops:
            out[op_id] = op
        return out

    def to_text(self) -> str:
        rels = ", ".join(f"{r.alias}[{', '.join(r.columns)}]" for r in self.relations)
        return (f"core(relations=[{rels}]; filters={list(self.filters)}; joins="
                f"{list(self.joins)}; projections={list(self.projections)}"
                + (f"; aggregates={list(self.aggregates)}" if self.aggregates else "")
                + (f"; seen_through={[i for i, _ in self.ops]}" if self.ops else "") + ")")


def extract_cores(tree: exp.Expr, ops: list[AiOp]) -> tuple[list[Core], list[AiOp]]:
    """All cores of `tree` (a lowered statement), and `ops` with ai_join kinds filled in."""
    ops = list(ops)
    absorbed: set[int] = set()
    cores = []
    for select in tree.find_all(exp.Select):
        if id(select) in absorbed:
            continue
        seen = see_through(select, ops, conjuncts)
        if seen is None:
            core = _extract(select, ops, absorbed)
        else:
            core = _seen_through(*seen, ops, absorbed)
        if core is not None:
            cores.append(core)
    _mark_unplanned_joins(tree, ops)
    return cores, ops


def _extract(select: exp.Select, ops: list[AiOp], absorbed: set[int]) -> Core | None:
    pending = Pending(select=select, sources=_scannable(select), ops=ops)
    if not pending.sources:
        return None
    plan_conjuncts(pending, absorbed)
    aliases = {e.alias for e in select.expressions if e.alias}
    for node in select.expressions:
        for call in node.find_all(exp.Anonymous):
            op_id = op_id_of(call)
            if op_id is None or call.find_ancestor(exp.Select) is not select:
                continue
            aggregate = ops[op_id].op in AGGREGATE_OPS
            if not aggregate and not is_row_level(call) or reads_alias(call, aliases):
                continue
            target = pending.aggregates if aggregate else pending.projections
            if reads_only(ops[op_id], pending.sources) and op_id not in target \
                    and op_id not in pending.filters:
                target.append(op_id)
    for op_id in [*row_calls(select, aliases), *lateral_calls(select, ops, pending.sources)]:
        if op_id not in (*pending.filters, *pending.joins, *pending.projections) and \
                ops[op_id].op not in AGGREGATE_OPS and reads_one(ops[op_id], pending.sources):
            pending.projections.append(op_id)
    if pending.filters or pending.joins or pending.projections or pending.aggregates:
        return _core(pending)
    return None


def _seen_through(view: exp.Select, rebound: dict[int, AiOp], ops: list[AiOp],
                  absorbed: set[int]) -> Core | None:
    """The core of a planning view (label_ctes.see_through): extracted over the ops with the
    CTE's re-bound; what extraction sets on the outer ops (join kinds, NOT) reaches the
    statement's ops, the CTE's ops stay the core's own."""
    local = list(ops)
    for op_id, op in rebound.items():
        local[op_id] = op
    core = _extract(view, local, absorbed)
    if core is None:
        return None
    for op_id in range(len(ops)):
        if op_id not in rebound:
            ops[op_id] = local[op_id]
    used = {*core.filters, *core.joins, *core.projections, *core.aggregates}
    return dataclasses.replace(core, ops=tuple((i, local[i]) for i in sorted(rebound)
                                               if i in used))


def _scannable(select: exp.Select) -> dict[str, exp.Expr]:
    """Relations that can be scanned on their own (tables, subqueries); LATERAL / UNNEST
    sources depend on another relation's row, so AI ops reading them are not planned (calls in
    their input that read the scanned relations are: lateral_calls)."""
    return {a: s for a, s in sources_of(select).items() if isinstance(s, exp.Table | exp.Subquery)
            and not isinstance(s.this, exp.Unnest)}



def _core(p: Pending) -> Core:
    keys: list[EquiKey] = []
    for op_id in p.joins:
        join = p.ops[op_id].join
        equi = []
        for c, _, default in p.relational:
            sides = _equi_sides(c, p.sources, default)
            if sides and {sides[0][0], sides[1][0]} == {join.left[0], join.right[0]}:
                n = len(keys)
                left, right = sides if sides[0][0] == join.left[0] else sides[::-1]
                p.keys.append((n, left, right))
                equality = Equality(join.left[0], join.right[0], c.copy())
                keys.append(EquiKey(op_id, n, equality))
                equi.append(equality)
        p.ops[op_id] = dataclasses.replace(p.ops[op_id],
                                           join=dataclasses.replace(join, equi=tuple(equi)))
    relations = tuple(scan_relation(p, alias) for alias in p.sources)
    return Core(relations, tuple(p.filters), tuple(p.joins), tuple(p.projections),
                tuple(p.aggregates), tuple(keys))


def _equi_sides(c: exp.Expr, sources, default: str | None):
    if not isinstance(c, exp.EQ):
        return None
    out = []
    for side in (c.this, c.expression):
        tables = {col.table or default for col in side.find_all(exp.Column)}
        if len(tables) != 1 or None in tables or next(iter(tables)) not in sources:
            return None
        out.append((next(iter(tables)), side))
    return (out[0], out[1]) if out[0][0] != out[1][0] else None


def _mark_unplanned_joins(tree: exp.Expr, ops: list[AiOp]) -> None:
    """Boolean AI predicates in WHERE/ON that read two relations are ai_join even when unplanned
    (under OR, in an outer join's ON)."""
    for i, op in enumerate(ops):
        aliases = [a for a in dict.fromkeys(b.alias for b in op.bindings) if a is not None]
        if op.op != OpKind.AI_FILTER or op.context not in ("where", "join_on") or len(aliases) < 2:
            continue
        kind = "inner"
        for call in tree.find_all(exp.Anonymous):
            join = call.find_ancestor(exp.Join)
            if op_id_of(call) == i and join is not None and not is_inner(join):
                kind = (join.side or "inner").lower()
        ops[i] = dataclasses.replace(op, op=OpKind.AI_JOIN,
                                     join=JoinInfo(kind, tuple(aliases[:1]), tuple(aliases[1:])))

