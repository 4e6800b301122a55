"""Selectivity of an AI predicate for planning: a hint wins, then a sample, then a default.

A sampled rate is smoothed away from 0 and 1 ((hits + 1/2) / (n + 1)): a sample of eight rows
that all passed must not make the planner believe a predicate never filters anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from quail_engine.plan.context import DEFAULT_SELECTIVITY
from quail_engine.sql.ir import PREDICATE_KINDS


def estimate(hint: float | None, hits: int = 0, sampled: int = 0) -> tuple[float, str]:
    """(selectivity, source) with source one of hint | sample | default."""
    if hint is not None:
        if not 0.0 <= hint <= 1.0:
            raise ValueError(f"selectivity hint must be within 0..1, got {hint!r}")
        return float(hint), "hint"
    if sampled > 0:
        return (hits + 0.5) / (sampled + 1), "sample"
    return DEFAULT_SELECTIVITY, "default"


def is_sampled(kinds: Iterable[str]) -> bool:
    """Whether a core with operators of `kinds` samples its predicates' selectivities: only
    where they can change its plan (two or more AI predicates: the filters' order, the joins'
    order, what a join sees of a filtered side). A core with one is planned the same at any
    selectivity, and on the GPU a sample's first small pass costs seconds."""
    return sum(1 for kind in kinds if kind in PREDICATE_KINDS) > 1


def sample_size(requested: int, rows: int) -> int:
    """Rows to sample: at most a quarter of the table (on a tiny table a sample would cost more
    than any reordering saves)."""
    return max(0, min(requested, rows // 4))
