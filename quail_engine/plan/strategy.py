"""How the executor runs a core's steps, decided from the plan's join order: the relation a star
of joins anchors on, when the joins are asked early for the documents the filters carry (and
which later joins ride over the documents they drop: plan/riding.dropped_rides), the order
the relations' filters run in, where projections run, where the joins are planned again from
observed rows, and the turns the joins take (plan/join_program.py: which two joins share anchor
chunks, which ride along another's, what a chain's last join is handed), decided again for each
order re-planned from observed rows (PhysicalPlan.replan_joins).

A star (every join anchored on one relation, each bringing in another) depends on a set of its
anchor rows alone, so its anchor rows can be asked every join in chunks, each chunk's documents
encoded once for all of them. Documents a filter carries into the first join hold at most a
share of a bounded KV arena; past it, the joins are asked early for the documents carried so
far, where the plan lets every pair those documents take part in be known then (`early`). The
carried relation filters last, so its partners' survivors are known by then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from quail_engine.plan import chunking
from quail_engine.plan.batching import for_spec
from quail_engine.plan.filter_chunks import FilterRun, carry_flushes, filter_run
from quail_engine.plan.join_order import Candidate
from quail_engine.plan.join_program import join_program, star_anchor
from quail_engine.plan.physical import PhysicalPlan
from quail_engine.plan.riding import dropped_rides
from quail_engine.plan.row_limit import (
    PROJECT_WITH_FILTERS,
    RowLimit,
    core_limit,
    projections_at,
)
from quail_engine.settings import prefix_sharing_enabled

# how the joins are asked early for the carried documents (PhysicalPlan.carry.early)
EARLY_PAIR = "pair"        # a core of two relations joined by one AI join: every surviving pair
EARLY_STAR = "star"        # a star on the carried relation: its joins in turn, documents shared
EARLY_LEADING = "leading"  # a longer plan's first join, from and anchored on the carried relation
# where the joins are planned again from observed row counts (PhysicalPlan.replans)
REPLAN_FILTERS = "filters"  # the filters' survivors, before the first join
REPLAN_JOIN = "join"        # the joined rows, after each join that leaves relations to join


def early_ask(carried: str, cand: Candidate | None, relations: Sequence[str]) -> str | None:
    """How the joins can be asked for the documents `carried` holds while they are resident
    (EARLY_*), None where some pair they take part in is known only later (their surplus is
    then encoded again by the join)."""
    if cand is None:
        return None
    if star_anchor(cand) == carried:
        return EARLY_STAR
    first = cand.steps[0] if cand.steps else None
    if (len(relations) > 2 and first is not None and first.op is not None
            and tuple(cand.start) == (carried,) and first.anchor == carried):
        return EARLY_LEADING
    if len(relations) == 2 and len(cand.steps) == 1 and cand.steps[0].op is not None:
        return EARLY_PAIR
    return None


def filter_order(relations: Sequence[str], carried: str | None) -> tuple[str, ...]:
    """The relations in the order their filters run: as written, the carried relation last (its
    partners' survivors are then known when its documents outgrow their share)."""
    return tuple(sorted(relations, key=lambda alias: alias == carried))


def outer_free(joins: Sequence[int], ai_ops: Sequence) -> bool:
    """Whether the AI joins `joins` are all inner (or cross): then the joined rows the planned
    joins keep are the statement's, and projections over them can be asked for those alone
    (an outer join keeps rows no pair passes for, which DuckDB's final statement asks)."""
    return {ai_ops[o].join.kind for o in joins if ai_ops[o].join} <= {"inner", "cross"}


def pair_projections(plan: PhysicalPlan, ai_ops: Sequence) -> tuple[int, ...]:
    """The AI projections over several relations that read the rows the core's joins keep,
    asked for each chunk of the last join's pairs while its documents are resident, when the
    joins are all inner."""
    if not outer_free([s.op for s in plan.steps if s.kind == "join" and s.op is not None],
                      ai_ops):
        return ()
    return tuple(s.op for s in plan.steps if s.kind == "project" and not s.alias)


def replans(plan: PhysicalPlan) -> tuple[str, ...]:
    """The observation points where the executor plans the joins again (`replan_joins`): the
    filters' survivors are counted, not estimated, before the first join; each join's rows
    before the next, where one follows."""
    if not plan.candidates:
        return ()
    return (REPLAN_FILTERS, REPLAN_JOIN) if len(plan.relations) > 2 else (REPLAN_FILTERS,)


def with_strategy(plan: PhysicalPlan, joins: Sequence[int] = (), ai_ops: Sequence = (),
                  limit: RowLimit | None = None, num_cores: int = 1) -> PhysicalPlan:
    """`plan` with its star, its carry's early ask and the joins riding on what its filters
    drop, its filter order (the filter steps in that order), its chunking, its projections'
    place and its LIMIT's (plan/row_limit.py), its re-planning points and its joins' turns
    (plan/join_program.py) decided; `joins`: the core's AI joins, `ai_ops` the query's
    operators by id, `limit`: the statement's LIMIT pushed below its AI calls, of a statement
    of `num_cores` cores."""
    cand = plan.candidates[0] if plan.candidates else None
    carry = plan.carry
    if carry is not None:
        early = early_ask(carry.alias, cand, plan.relations)
        carry = replace(carry, early=early, flushes=carry_flushes(early, EARLY_STAR))
    order = filter_order(plan.relations, carry.alias if carry is not None else None)
    rank = {alias: n for n, alias in enumerate(order)}
    filters = sorted((s for s in plan.steps if s.kind == "filter"),
                     key=lambda s: rank.get(s.alias, len(rank)))
    at = [n for n, s in enumerate(plan.steps) if s.kind == "filter"]
    steps = list(plan.steps)
    for n, step in zip(at, filters):
        steps[n] = step
    rides = dropped_rides(plan.context, cand, carry.alias) if carry is not None else ()
    star = star_anchor(cand)
    if star is not None and plan.context is not None and \
            not plan.context.ops[cand.steps[0].op].shares_document:
        star = None  # its anchor chunks would hold no document for the joins to share
    plan = replace(plan, steps=tuple(steps), carry=carry, star=star,
                   filter_order=order, chunking=chunking.DEFAULT, dropped_rides=rides)
    pairs = pair_projections(plan, ai_ops) if ai_ops else ()
    carried = carry.alias if carry is not None else None
    program = join_program(plan.context, cand, plan.relations, carried,
                           hands_off=not plan.reads_joined_rows, projections=pairs) \
        if plan.context is not None else None
    limit = core_limit(limit, num_cores, len(plan.relations), plan.has_joins)
    plan = replace(plan, pair_projections=pairs, limit=limit,
                   projections_at=projections_at(limit, plan.has_joins,
                                                 outer_free(joins, ai_ops)),
                   replans=replans(plan), joins=program,
                   batching=for_spec(plan.context.device)
                   if plan.context is not None and plan.context.device is not None
                   else plan.batching)
    return replace(plan, filter_runs=filter_runs(plan, prefix_sharing_enabled()))


def filter_runs(plan: PhysicalPlan, sharing: bool) -> tuple[FilterRun, ...]:
    """Each relation's filter steps (and the projections run with them) over chunks of its rows,
    in the plan's filter order (plan/filter_chunks.py); `sharing`: prefix sharing is on."""
    ops = plan.context.ops if plan.context is not None else {}
    with_filters = plan.projections_at == PROJECT_WITH_FILTERS
    out = []
    for alias in plan.filter_order:
        at = [n for n, s in enumerate(plan.steps) if s.alias == alias and (
            s.kind == "filter" or (with_filters and s.kind == "project"))]

        def tokens_of(op: int, alias: str = alias) -> float | None:
            return ops[op].tokens.get(alias, 0.0) if op in ops else None

        out.append(filter_run(alias, [plan.steps[n] for n in at], at, tokens_of, sharing))
    return tuple(out)
