"""The order an operator's call asks its rows in (plan/call_order.py)."""

import pytest

from quail_engine.plan.call_order import AS_PLANNED, CACHED_FIRST, call_order_text, held_first


@pytest.mark.parametrize("held,expected", [
    ((0, 16, 0, 8), [1, 3, 0, 2]),   # held documents first, order otherwise kept
    ((0, 0, 0), [0, 1, 2]),
    ((5, 5), [0, 1]),
    ((), []),
])
def test_held_first(held, expected):
    assert held_first(held) == expected


def test_explain_line():
    assert call_order_text(CACHED_FIRST) == (
        "calls: cached answers skipped, prefix-cached documents first (observed per call)")
    assert call_order_text(AS_PLANNED) == (
        "calls: cached answers skipped, the rest in the plan's order")
