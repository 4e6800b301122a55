"""Whether a later join rides along an earlier one's resident anchor chunks: the re-planning
point of a join's chunks.

A later join of a chain whose anchor documents are an earlier join's (another alias of the same
table) can be asked over each of the earlier join's anchor chunks while their KV is resident,
ahead of its turn, for every pair it may read then. That saves encoding those documents again at
its turn, and costs the questions of the pairs the joins in between eliminate. How many they
eliminate depends on the rows the earlier join keeps, which the sampled estimate can put far off
for a rare match; so the decision is taken again at each of its chunks (the observation point),
from the rows it kept so far (`kept_rows`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from quail_engine.plan.context import PlanContext
from quail_engine.plan.join_order import Candidate, JoinStep


def ride_partners(ctx: PlanContext, step: JoinStep, later: Sequence[JoinStep], joined
                  ) -> list[tuple[int, str, str]]:
    """(index in `later`, anchor, partner) of the later joins that may ride along `step`'s
    anchor chunks when the aliases `joined` are joined: a join anchored on an alias not joined
    yet whose prompt reads just that alias and one partner, both sharing a document, neither
    tied to another relation by an equality key (then the pairs it can ask are known now: the
    anchor's survivors x the partner's candidates). Whether one does is `is_ride_worth`'s, at
    each chunk."""
    if step.op is None or step.anchor is None or not ctx.ops[step.op].shares_document:
        return []
    every = {*joined, step.alias, *(s.alias for s in later)}
    out = []
    for k, late in enumerate(later):
        anchor = late.anchor
        if late.op is None or late.op == step.op or anchor is None or anchor in joined \
                or anchor in (step.anchor, step.alias):
            continue
        info = ctx.ops[late.op]
        bound = [a for a in dict.fromkeys(info.aliases) if a in every]
        if not info.shares_document or anchor not in bound or len(bound) != 2:
            continue
        partner = next(a for a in bound if a != anchor)
        if not set(info.aliases) <= {anchor, partner} or any(
                ctx.is_keyed(a, b) for a in (anchor, partner) for b in every if b != a):
            continue
        out.append((k, anchor, partner))
    return out


def planned_rides(ctx: PlanContext, cand: Candidate | None
                  ) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """(join, the later joins that may ride along its anchor chunks) for each join of `cand`'s
    order that has some (`ride_partners`, the aliases joined before it). Decided again wherever
    the joins are re-planned; whether one rides is judged at each chunk."""
    if cand is None:
        return ()
    joined, out = set(cand.start), []
    steps = list(cand.steps)
    for k, step in enumerate(steps):
        later = steps[k + 1:]
        riders = tuple(later[i].op for i, _, _ in ride_partners(ctx, step, later,
                                                                frozenset(joined)))
        if riders:
            out.append((step.op, riders))
        joined.add(step.alias)
    return tuple(out)


def dropped_rides(ctx: PlanContext, cand: Candidate | None, carried: str) -> tuple[int, ...]:
    """The later joins asked over the documents the carried relation's filters drop, while each
    filter chunk still holds them: another alias of the same table that those filters do not
    restrict reads them too (reviews r2 beside a filtered r1), and releasing them would have its
    join encode them again. Those `ride_partners` lets ride along the join that takes the carry,
    except one whose partner is the carried relation (its survivors are known only after its
    filters). Whether one does is judged at each chunk (`kept_rows`, the plan's estimate
    before the first join has answers)."""
    if cand is None or not cand.steps or cand.steps[0].anchor != carried:
        return ()
    first, later = cand.steps[0], cand.steps[1:]
    return tuple(later[k].op for k, _, partner in ride_partners(ctx, first, later,
                                                                frozenset(cand.start))
                 if partner != carried)


def kept_rows(asked: int, passed: int, rows_in: float, before: float = 0.0) -> float:
    """The rows a join is expected to keep of its `rows_in` candidates, once `passed` of the
    `asked` pairs so far passed (`before` until any is asked)."""
    return passed / asked * rows_in if asked else before


def ride_reach(aliases, steps: Sequence[JoinStep], joined, candidates: Mapping[str, int]
               ) -> float:
    """The share of a riding join's pairs (its `aliases`' candidate rows x each other) the
    planner expects it to ask at its turn, `steps[-1]`, when the aliases `joined` are joined
    and `steps[0]` comes next. A relation's rows are spread over the joined rows: each join
    after it is in keeps 1 - exp(-rows out / its rows then) of them (so does the join that
    brings it in, of its candidates); the riding join itself asks all it has."""
    reach = 1.0
    for alias in aliases:
        rows = float(candidates.get(alias, 0))
        present = alias in joined
        for t in steps[:-1]:
            present = present or t.alias == alias
            if present:
                kept = 1.0 - math.exp(-t.rows_out / max(1.0, rows))
                reach, rows = reach * kept, rows * kept
        if not present and steps[-1].alias != alias:
            return 0.0
    return reach


def is_ride_worth(aliases, steps: Sequence[JoinStep], joined, candidates: Mapping[str, int],
                  rows_out: float, documents: int, questions: int, partners: int) -> bool:
    """Whether the join `steps[-1]` rides along `steps[0]`'s anchor chunks when `steps[0]`
    keeps `rows_out` rows: the documents it would encode again at its turn (`documents`
    characters) outweigh the questions (`questions` characters per partner, `partners` of
    them) it asks for rows the joins between eliminate: reach x documents > (1 - reach) x
    questions x partners."""
    steps = [replace(steps[0], rows_out=rows_out), *steps[1:]]
    reach = ride_reach(aliases, steps, joined, candidates)
    return reach * documents > (1.0 - reach) * questions * partners
