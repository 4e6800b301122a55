"""The join order of a core: its AI join edges and the best candidate among the non-dominated
ones (anchor hints honoured, with a remark when the planner estimates another order faster).
Used when a core is planned and again when the executor re-plans from observed row counts
(PhysicalPlan.replan_joins)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from quail_engine.plan.context import PlanContext
from quail_engine.plan.join_order import Candidate, JoinEdge, plan_joins
from quail_engine.plan.nodes import AiJoin, Node, walk


def join_edges(logical: Node, ctx: PlanContext) -> list[JoinEdge]:
    edges = []
    for node in walk(logical):
        if isinstance(node, AiJoin):
            aliases = ctx.ops[node.op].aliases
            if len(aliases) == 2:
                edges.append(JoinEdge(node.op, aliases[0], aliases[1]))
    for a, b in ctx.pair_fraction:
        if not any({e.a, e.b} == {a, b} for e in edges):
            edges.append(JoinEdge(None, a, b))
    return edges


def choose_join(aliases: Sequence[str], edges: Sequence[JoinEdge], ctx: PlanContext,
                rows: Mapping[str, float] | None = None,
                start: tuple[frozenset[str], float] | None = None
                ) -> tuple[Candidate | None, list[Candidate], tuple[str, ...]]:
    """Best candidate honouring anchor hints, all non-dominated ones, and remarks."""
    if len(aliases) < 2:
        return None, [], ()
    cands = plan_joins(aliases, edges, ctx, rows=rows, start=start, hints=True)
    free = plan_joins(aliases, edges, ctx, rows=rows, start=start, hints=False)
    remarks: tuple[str, ...] = ()
    if cands and free and ctx.seconds(free[0].work) < ctx.seconds(cands[0].work) * 0.999:
        remarks = (f"anchor hint kept although the planner estimates {free[0].text()} faster "
                   f"({ctx.seconds(free[0].work):.3g}s vs {ctx.seconds(cands[0].work):.3g}s)",)
    best = cands[0] if cands else (free[0] if free else None)
    return best, cands or free, remarks
