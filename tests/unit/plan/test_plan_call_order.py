"""How an operator's call asks its rows (plan/call_order.py): its order and whether it takes the
answers the answer cache holds, as the plan names them."""

import pytest
from plan_fakes import Core, Rel, context, filter_op, info

from quail_engine.plan.call_order import (
    AS_PLANNED,
    CACHED_FIRST,
    NO_CACHE,
    REUSE_CACHED,
    call_order_text,
    held_first,
)
from quail_engine.plan.planner import plan_core


@pytest.mark.parametrize("held,expected", [
    ((0, 16, 0, 8), [1, 3, 0, 2]),   # held documents first, order otherwise kept
    ((0, 0, 0), [0, 1, 2]),
    ((5, 5), [0, 1]),
    ((), []),
])
def test_held_first(held, expected):
    assert held_first(held) == expected


@pytest.mark.parametrize("order,cached,line", [
    (CACHED_FIRST, REUSE_CACHED,
     "calls: cached answers skipped, prefix-cached documents first (observed per call)"),
    (AS_PLANNED, REUSE_CACHED, "calls: cached answers skipped, the rest in the plan's order"),
    (CACHED_FIRST, NO_CACHE,
     "calls: every row asked (answer cache off), prefix-cached documents first "
     "(observed per call)"),
    (AS_PLANNED, NO_CACHE, "calls: every row asked (answer cache off), in the plan's order"),
])
def test_explain_line(order, cached, line):
    assert call_order_text(order, cached) == line


@pytest.mark.parametrize("use_cache,cached,asked", [
    (True, REUSE_CACHED, "cached answers skipped"),
    (False, NO_CACHE, "every row asked (answer cache off)"),
])
def test_the_plan_names_whether_calls_take_cached_answers(use_cache, cached, asked):
    """The session's cache setting (`--no-cache`: off) becomes the plan's `cached_answers`,
    which `quail explain` prints on its calls line."""
    core = Core((Rel("r", columns=("b_0_0",)),), filters=(0,))
    ops = [info(0, "ai_filter", ["r"], {"r": 120}, doc="r.review")]
    plan = plan_core(core, [filter_op("r", "review")], context(ops, {"r": 200}),
                     use_cache=use_cache)
    assert plan.cached_answers == cached
    assert f"calls: {asked}, prefix-cached documents first (observed per call)" in \
        plan.text().splitlines()
