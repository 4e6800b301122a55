"""Plan one core: naive logical plan -> optimizer rules -> join order -> physical plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from quail_engine.plan.build import build_logical
from quail_engine.plan.call_order import cached_answers_for
from quail_engine.plan.context import PlanContext
from quail_engine.plan.join_choice import choose_join, join_edges
from quail_engine.plan.nodes import AiJoin, Node, Scan, walk
from quail_engine.plan.optimizer import optimize
from quail_engine.plan.physical import (
    PhysicalPlan,
    build_physical,
    filter_chains,
    projection_aliases,
    read_alias,
)
from quail_engine.plan.row_limit import RowLimit
from quail_engine.plan.sampling import SampleStep
from quail_engine.plan.strategy import with_strategy


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


def _followed_hints(ctx: PlanContext) -> tuple[PlanContext, tuple[str, ...]]:
    """`ctx` without the anchor hints that name another relation than their AI join's document,
    and a remark for each: a join's document is its first argument's relation whatever the plan,
    so that its answers do not depend on the plan."""
    ops, remarks = dict(ctx.ops), []
    for op, info in ctx.ops.items():
        hint, document = info.anchor_hint, info.document
        if hint is not None and document is not None and hint != document:
            remarks.append(
                f"{info.kind} #{op}: the anchor hint {hint!r} is not followed: an AI join's "
                f"document is its first argument's relation ({document!r}), whatever the "
                f"plan, so that its answers do not depend on the plan; write the prompt with "
                f"{hint!r}'s column first to make it the document")
            ops[op] = replace(info, anchor_hint=None)
    return (replace(ctx, ops=ops) if remarks else ctx), tuple(remarks)


def plan_core(core, ai_ops: Sequence, ctx: PlanContext, limit: RowLimit | None = None,
              num_cores: int = 1, samples: tuple[SampleStep, ...] = (),
              use_cache: bool = True) -> PhysicalPlan:
    """`core` follows sql.query.Core; `ai_ops` are the query's operators by id; `limit`: the
    statement's LIMIT pushed below its AI calls (exec/limit_pushdown.py), of a statement of
    `num_cores` cores (plan/row_limit.core_limit says where it binds); `samples`: those taken
    before planning, whose rates `ctx` holds (plan/sampling.sample_steps); `use_cache`: the
    session's answer cache is on (its calls take the answers it holds: plan/call_order.py)."""
    ctx, hint_remarks = _followed_hints(ctx)
    logical = optimize(build_logical(core, ai_ops), ctx)
    aliases = [n.alias for n in walk(logical) if isinstance(n, Scan)]
    rows = {a: float(ctx.rows.get(a, 0.0)) for a in aliases}
    for alias, chain in filter_chains(logical).items():  # joins see the filters' survivors
        for f in chain:
            rows[alias] *= ctx.ops[f.op].selectivity
    edges = tuple(join_edges(logical, ctx))
    resident = replace(ctx, resident=_resident_anchors(logical, ai_ops))
    best, cands, remarks = choose_join(aliases, edges, resident, rows=rows)
    aggregates = {op: read_alias(ctx, op) for op in getattr(core, "aggregates", ())}
    plan = build_physical(logical, resident, best, projection_aliases(logical, ctx), remarks,
                          tuple(cands), aggregates)
    # re-planned from observed counts over the core's relations in written order, every
    # anchor costed as encoded
    return with_strategy(replace(plan, relations=tuple(r.alias for r in core.relations),
                                 edges=edges, context=ctx, hint_remarks=hint_remarks,
                                 samples=samples, cached_answers=cached_answers_for(use_cache)),
                         core.joins, ai_ops, limit, num_cores)
