"""The planner counts prefix sharing across rows: the share of a column's text that begins like
another row's, and the fresh tokens a request need not run because of it."""

import pytest

from quail_engine.plan.cost import Work, request_work
from quail_engine.plan.sharing import shared_prefix_fraction

TURN = "the agent ran the tests and read the traceback. " * 8  # ~400 characters a turn


@pytest.mark.parametrize("p,s,new,shared,expected", [
    (0, 10, False, 6, Work(4, 55 - 21, 0, 6)),          # no prefix: the own tokens' start
    (0, 10, False, 50, Work(1, 55 - 45, 0, 9)),         # at least one own token runs
    (10, 4, True, 8, Work(14 - 8, 105 - 36, 2, 18)),    # a new prefix: its start is read
    (10, 4, False, 8, Work(4, 50, 0, 10)),              # a resident prefix: nothing changes
    (10, 4, True, 0, Work(14, 105, 10, 10)),
])
def test_request_work_with_shared_tokens(p, s, new, shared, expected):
    assert request_work(p, s, new, shared) == expected


def test_cumulative_snapshots_share_most_of_their_text():
    snapshots = [TURN * k for k in range(1, 11)]
    fraction = shared_prefix_fraction(snapshots[::-1])
    distinct = len(snapshots[-1])
    assert fraction == pytest.approx(1 - distinct / sum(map(len, snapshots)))
    assert fraction > 0.8


@pytest.mark.parametrize("texts", [
    [f"review {i}: " + TURN for i in range(10)],          # begin alike for a few characters
    ["x" * 100, "x" * 100 + "y"],                          # shorter than a page of tokens
    [],
])
def test_short_or_no_common_beginnings_count_nothing(texts):
    assert shared_prefix_fraction(texts) == 0.0


def test_a_sample_of_rows_is_measured_against_all_rows():
    snapshots = [TURN * k for k in range(1, 11)]
    assert shared_prefix_fraction(snapshots, sample=[9]) == pytest.approx(0.9)
    assert shared_prefix_fraction(snapshots, sample=[0]) == 0.0


def test_a_filter_over_rows_that_begin_alike_is_estimated_with_fewer_fresh_tokens():
    """AGENT-1's shape: one filter over cumulative snapshots; the plan's fresh tokens (the
    report's est_tokens) count their shared beginnings once."""
    from dataclasses import replace

    from plan_fakes import Core, Rel, context, filter_op, info

    from quail_engine.plan.planner import plan_core

    core = Core((Rel("t", columns=("b_0_0",)),), filters=(0,))
    plain = info(0, "ai_filter", ["t"], {"t": 2000}, sel=0.5, doc="t.trace", question=60)
    fresh = {}
    for name, op in (("plain", plain), ("shared", replace(plain, shared={"t": 0.9}))):
        plan = plan_core(core, [filter_op("t", "trace")], context([op], {"t": 100}))
        fresh[name] = sum(s.work.fresh_tokens for s in plan.steps)
    assert fresh["plain"] == 100 * (2000 + 60)
    assert fresh["shared"] == pytest.approx(100 * (200 + 60))
