"""How an operator's call asks its rows (PhysicalPlan.call_order, PhysicalPlan.cached_answers).

With REUSE_CACHED (the session's answer cache on) a call first takes the answers the answer
cache holds (by text and model identity) and asks only the others, taking again before a ride
the answers another call gained since; with NO_CACHE (`--no-cache`, `use_cache=False`) every
row is asked. Among the rows asked, with CACHED_FIRST, the rows whose document the engine's
prefix cache still holds go first, order otherwise kept: pages an earlier operator of the
statement left by content (a chain of joins reading one table twice: the documents its first
join encoded, asked again by a later one) are read before new documents evict them; a join's
anchor chunks are formed in that order too. What the prefix cache holds is observed at each
call.
"""

from __future__ import annotations

from collections.abc import Sequence

CACHED_FIRST = "cached_first"  # documents the engine's prefix cache holds, first
AS_PLANNED = "as_planned"      # the rows in the plan's order

REUSE_CACHED = "reuse"  # answers the answer cache holds taken, only the others asked
NO_CACHE = "off"        # every row asked: the session keeps no answer cache


def cached_answers_for(use_cache: bool) -> str:
    """What a call does with the answer cache under the session's setting (`use_cache`)."""
    return REUSE_CACHED if use_cache else NO_CACHE


def held_first(held: Sequence[int]) -> list[int]:
    """The indices of items whose documents the prefix cache holds `held` leading tokens of:
    those holding any first, order otherwise kept. Example: (0, 16, 0, 8) -> [1, 3, 0, 2]."""
    return sorted(range(len(held)), key=lambda k: held[k] == 0)


def call_order_text(order: str, cached_answers: str = REUSE_CACHED) -> str:
    """The line `quail explain` prints for `order` and `cached_answers`."""
    if cached_answers == REUSE_CACHED:
        asked, rest = "cached answers skipped", "the rest in the plan's order"
    else:
        asked, rest = "every row asked (answer cache off)", "in the plan's order"
    if order == CACHED_FIRST:
        return f"calls: {asked}, prefix-cached documents first (observed per call)"
    return f"calls: {asked}, {rest}"
