"""The order in which an operator's call asks its rows (PhysicalPlan.call_order).

Every call first takes the answers the answer cache holds (by text and model identity) and asks
only the others. Among those, with CACHED_FIRST, the rows whose document the engine's prefix
cache still holds go first, order otherwise kept: pages an earlier operator of the statement
left by content (a chain of joins reading one table twice: the documents its first join
encoded, asked again by a later one) are read before new documents evict them; a join's anchor
chunks are formed in that order too. What the prefix cache holds is observed at each call.
"""

from __future__ import annotations

from collections.abc import Sequence

CACHED_FIRST = "cached_first"  # documents the engine's prefix cache holds, first
AS_PLANNED = "as_planned"      # the rows in the plan's order


def held_first(held: Sequence[int]) -> list[int]:
    """The indices of items whose documents the prefix cache holds `held` leading tokens of:
    those holding any first, order otherwise kept. Example: (0, 16, 0, 8) -> [1, 3, 0, 2]."""
    return sorted(range(len(held)), key=lambda k: held[k] == 0)


def call_order_text(order: str) -> str:
    """The line `quail explain` prints for `order`."""
    if order == CACHED_FIRST:
        return "calls: cached answers skipped, prefix-cached documents first (observed per call)"
    return "calls: cached answers skipped, the rest in the plan's order"
