"""Whether a later join rides along an earlier one's resident anchor chunks: the re-planning
point of a join's chunks.

A later join of a chain whose anchor documents are an earlier join's (another alias of the same
table) can be asked over each of the earlier join's anchor chunks while their KV is resident,
ahead of its turn, for every pair it may read then. That saves encoding those documents again at
its turn, and costs the questions of the pairs the joins in between eliminate. How many they
eliminate depends on the rows the earlier join keeps, which the sampled estimate can put far off
for a rare match; so the plan names the rides each join may take (`PlannedRide`, on the join's
turn: plan/join_program.py) and decides at each of its chunks, the observation point, from the
rows it kept so far and what the executor saw of the riding join (`PlannedRide.is_worth`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

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


@dataclass(frozen=True)
class RideSeen:
    """What the executor observed of a riding join before the join it rides along runs: its two
    aliases' candidate rows, the characters of its documents (each once) and of its questions
    (one per anchor row), and how many partner rows each of its anchor rows is asked with."""

    candidates: Mapping[str, int]
    documents: int
    questions: int
    partners: int


@dataclass(frozen=True)
class PlannedRide:
    """The join `op` (anchored on `anchor`, read with `partner`) may ride along the anchor
    chunks of `steps[0]`; `steps`: that join, the joins between and `op`'s; `joined`: the aliases
    joined before `steps[0]`. Whether it does is decided at each chunk, the observation point,
    from the rows `steps[0]` kept so far (`is_worth`). `estimate_first`: judged by the plan's
    estimate of those rows until `steps[0]` has answers (over the documents the filters drop,
    before it runs), else not before it has some."""

    op: int
    anchor: str
    partner: str
    steps: tuple[JoinStep, ...]
    joined: frozenset[str]
    estimate_first: bool = False

    def is_worth(self, seen: RideSeen, asked: int, passed: int) -> bool:
        """Whether it rides once `passed` of the `asked` pairs of `steps[0]` passed."""
        first = self.steps[0]
        if not asked and not self.estimate_first:
            return False
        kept = kept_rows(asked, passed, first.rows_in,
                         first.rows_out if self.estimate_first else 0.0)
        return is_ride_worth((self.anchor, self.partner), self.steps, self.joined,
                             seen.candidates, kept, seen.documents, seen.questions,
                             seen.partners)


def rides_along(ctx: PlanContext, step: JoinStep, later: Sequence[JoinStep], joined
                ) -> tuple[PlannedRide, ...]:
    """The PlannedRide of each later join `ride_partners` lets ride along `step`'s chunks."""
    return tuple(PlannedRide(later[k].op, anchor, partner, (step, *later[:k + 1]),
                             frozenset(joined))
                 for k, anchor, partner in ride_partners(ctx, step, later, joined))


def dropped_rides(ctx: PlanContext, cand: Candidate | None, carried: str
                  ) -> tuple[PlannedRide, ...]:
    """The later joins asked over the documents the carried relation's filters drop, while each
    filter chunk still holds them: another alias of the same table that those filters do not
    restrict reads them too (reviews r2 beside a filtered r1), and releasing them would have its
    join encode them again. Those `ride_partners` lets ride along the join that takes the carry,
    except one whose partner is the carried relation (its survivors are known only after its
    filters). Whether one does is judged at each filter chunk (by the plan's estimate of the
    rows the join keeps until it has answers)."""
    if cand is None or not cand.steps or cand.steps[0].anchor != carried:
        return ()
    return tuple(replace(r, estimate_first=True)
                 for r in rides_along(ctx, cand.steps[0], cand.steps[1:], frozenset(cand.start))
                 if r.partner != carried)


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
