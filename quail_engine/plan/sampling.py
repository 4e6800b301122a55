"""Which predicates the executor samples before it plans a core, and how many rows: the plan's
first observation point (PhysicalPlan.samples).

A predicate's selectivity orders the filters and the joins. Where it can change the plan
(plan/selectivity.is_sampled) and no hint gives it, the executor asks the predicate on a small
evenly spaced sample first (its answers are kept) and the planner plans with the observed rate:
a filter over rows of its relation, a join over pairs of its two relations' sampled rows whose
equality keys match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from quail_engine.plan.selectivity import is_sampled, sample_size
from quail_engine.sql.op_kinds import OpKind, spec

SAMPLE_ROWS = "rows"    # a filter's rows of its relation
SAMPLE_PAIRS = "pairs"  # a join's pairs, at most this many


@dataclass(frozen=True)
class SampleCandidate:
    """What the executor knows of an operator before sampling: its `kind`, whether a hint
    gives its selectivity, and the relations its bindings read (`aliases`, in binding order)."""

    op: int
    kind: str
    has_hint: bool
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class SampleStep:
    """Ask predicate `op` on `rows` sampled rows (SAMPLE_ROWS) or pairs (SAMPLE_PAIRS)."""

    op: int
    over: str
    rows: int

    def text(self) -> str:
        return f"#{self.op} {self.rows} {self.over}"


def sample_steps(ops: Sequence[SampleCandidate], rows: Mapping[str, int], requested: int
                 ) -> tuple[SampleStep, ...]:
    """The samples taken before planning a core of `ops` over relations of `rows` rows each,
    `requested` rows a predicate (the session's sample size). Example: two filters without
    hints over 100 rows, 8 requested -> (#0 8 rows, #1 8 rows)."""
    if not is_sampled(o.kind for o in ops):
        return ()
    out = []
    for o in ops:
        if o.has_hint or not spec(o.kind).is_predicate:
            continue
        k = sample_size(requested, min(rows.get(a, 0) for a in o.aliases))
        if not k:
            continue
        if OpKind(o.kind) == OpKind.AI_FILTER:
            out.append(SampleStep(o.op, SAMPLE_ROWS, k))
        elif len(o.aliases) == 2:  # a join's pairs are drawn from two relations
            out.append(SampleStep(o.op, SAMPLE_PAIRS, k))
    return tuple(out)


def samples_text(samples: Sequence[SampleStep]) -> str:
    """The line `quail explain` prints for the samples taken before planning."""
    return "sample before planning " + ", ".join(s.text() for s in samples)
