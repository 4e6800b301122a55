"""Plan one core: naive logical plan -> optimizer rules -> join order -> physical plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from quail_engine.plan.build import build_logical
from quail_engine.plan.context import PlanContext
from quail_engine.plan.join_order import Candidate, JoinEdge, plan_joins
from quail_engine.plan.nodes import AiJoin, Node, Scan, walk
from quail_engine.plan.optimizer import optimize
from quail_engine.plan.physical import (
    PhysicalPlan,
    build_physical,
    filter_chains,
    projection_aliases,
)


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
                rows=None, start=None) -> tuple[Candidate | None, list[Candidate], tuple[str, ...]]:
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


def _resident_anchors(logical: Node, ai_ops: Sequence) -> frozenset[tuple[int, str]]:
    """(join op, alias) where the alias's last AI filter reads exactly the join's document on
    that alias: the executor keeps that KV resident, so anchoring there encodes nothing."""
    chains = filter_chains(logical)
    out = set()
    for node in walk(logical):
        if isinstance(node, AiJoin):
            for alias, chain in chains.items():
                mine = [b.sql for b in ai_ops[node.op].bindings if b.alias == alias]
                if chain and mine == [b.sql for b in ai_ops[chain[-1].op].bindings]:
                    out.add((node.op, alias))
    return frozenset(out)


def plan_core(core, ai_ops: Sequence, ctx: PlanContext) -> PhysicalPlan:
    """`core` follows sql.query.Core; `ai_ops` are the query's operators by id."""
    logical = optimize(build_logical(core, ai_ops), ctx)
    aliases = [n.alias for n in walk(logical) if isinstance(n, Scan)]
    rows = {a: float(ctx.rows.get(a, 0.0)) for a in aliases}
    for alias, chain in filter_chains(logical).items():  # joins see the filters' survivors
        for f in chain:
            rows[alias] *= ctx.ops[f.op].selectivity
    ctx = replace(ctx, resident=_resident_anchors(logical, ai_ops))
    best, cands, remarks = choose_join(aliases, join_edges(logical, ctx), ctx, rows=rows)
    return build_physical(logical, ctx, best, projection_aliases(logical, ctx), remarks,
                          tuple(cands))
