"""The executor takes cached answers as the plan says (PhysicalPlan.cached_answers,
plan/call_order.py): a plan that says "off" has every row asked, whatever the cache holds."""

from dataclasses import replace

import pytest
from exec_fakes import FakeEngine, bfilter, filters_query, review_db

import quail_engine.exec.core_runner as core_runner
from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.config import SessionConfig
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.report import Report
from quail_engine.exec.session import QuailSession
from quail_engine.plan.call_order import NO_CACHE
from quail_engine.plan.cost import DeviceSpec

ROWS = [("great price, fair price",), ("bad battery",), ("price and battery",)]
REVIEWS = [(i, f"review {i} about the price of the price" if i % 2 else f"review {i}", 1)
           for i in range(1, 7)]
TOY = DeviceSpec("toy", 1e11, 2e10)


def test_a_runner_told_off_asks_every_row_over_a_warm_cache(tmp_path):
    op = bfilter("Mentions PRICE?")
    warm = OpRunner(FakeEngine(), AnswerCache.in_dir(tmp_path), Report())
    first = warm.answer(0, warm.layout(op), ROWS)
    runner = OpRunner(FakeEngine(), AnswerCache.in_dir(tmp_path), Report())
    assert runner.prepare(runner.layout(op), ROWS).todo == []  # the cache is warm
    runner.cached_answers = NO_CACHE
    prep = runner.prepare(runner.layout(op), ROWS)
    assert prep.cached == {} and sorted(prep.todo) == [0, 1, 2]
    assert runner.refreshed(prep) is prep  # nor taken again before a ride
    assert runner.answer(0, runner.layout(op), ROWS) == first
    assert runner.engine.calls > 0 and runner.report.ops[0].cache_hits == 0


def _run(con, parsed, tmp_path, use_cache=True):
    engine = FakeEngine()
    config = SessionConfig(device="cpu", cache_dir=tmp_path, use_cache=use_cache)
    s = QuailSession(con, lambda: engine, config, device_spec=TOY)
    s.parse = lambda sql, dialect: parsed
    return s.execute(parsed.duckdb_sql).to_pylist(), s.report, engine


@pytest.mark.parametrize("plan_says_off", [False, True])
def test_a_session_follows_the_plans_cached_answers(tmp_path, monkeypatch, plan_says_off):
    """The same warm cache: the plan's "reuse" answers every row from it, "off" (set on the
    plan here, the session's cache left on) asks the engine every row, same rows out."""
    con = review_db(REVIEWS, [(1, "widget")])
    parsed = filters_query((bfilter("Mentions PRICE?"),), where=(0,), project=())
    first, _, _ = _run(con, parsed, tmp_path)
    if plan_says_off:
        plan_core = core_runner.plan_core
        monkeypatch.setattr(core_runner, "plan_core", lambda *a, **k: replace(
            plan_core(*a, **k), cached_answers=NO_CACHE))
    again, report, engine = _run(con, parsed, tmp_path)
    assert again == first
    hits = report.ops[0].cache_hits
    assert (hits, engine.calls > 0) == ((0, True) if plan_says_off else (len(REVIEWS), False))


def test_a_session_without_the_cache_plans_every_row_asked(tmp_path):
    con = review_db(REVIEWS, [(1, "widget")])
    parsed = filters_query((bfilter("Mentions PRICE?"),), where=(0,), project=())
    _, report, _ = _run(con, parsed, None, use_cache=False)
    assert any("calls: every row asked (answer cache off)" in p for p in report.plans)
    _, report, _ = _run(con, parsed, tmp_path)
    assert any("calls: cached answers skipped" in p for p in report.plans)
