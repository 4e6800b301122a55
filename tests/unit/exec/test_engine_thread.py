"""Every engine call of the process runs on one long-lived thread (engine_thread.py): device
libraries cache per thread (PyTorch's cuDNN attention graphs), so a thread per operator call
rebuilt them in every call."""

import threading

import pytest
from exec_fakes import FakeEngine, bfilter, classify, filters_query, review_db

from quail_engine.exec import engine_thread
from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec

REVIEWS = [(i, f"review {i} mentions the price" if i % 2 else f"review {i} is short", 1)
           for i in range(1, 9)]


class ThreadRecordingEngine(FakeEngine):
    def __init__(self):
        super().__init__()
        self.threads: set[threading.Thread] = set()  # objects: a thread's ident can be reused

    def run(self, requests):
        self.threads.add(threading.current_thread())
        return super().run(requests)


def _session(engine):
    s = QuailSession(review_db(REVIEWS, [(1, "widget")]), lambda: engine,
                     device_spec=DeviceSpec("toy", 1e11, 2e10))
    return s


def test_operators_and_statements_share_one_engine_thread():
    engine = ThreadRecordingEngine()
    for ops in [(bfilter("Mentions PRICE?"), bfilter("Is it SHORT?"), classify()),
                (bfilter("Mentions REVIEW?"), classify())]:
        parsed = filters_query(ops, where=tuple(range(len(ops) - 1)), project=(len(ops) - 1,))
        s = _session(engine)
        s.parse = lambda sql, dialect, parsed=parsed: parsed
        s.execute(parsed.duckdb_sql)
    assert engine.calls >= 3
    assert len(engine.threads) == 1 and threading.current_thread() not in engine.threads


def test_a_call_from_the_engine_thread_runs_inline():
    def outer():
        inner = engine_thread.submit(threading.get_ident)  # would wait on itself if queued
        return threading.get_ident(), inner.result(timeout=5)

    mine, nested = engine_thread.submit(outer).result(timeout=5)
    assert mine == nested != threading.get_ident()


def test_an_exception_reaches_the_caller():
    def fail():
        raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch"):
        engine_thread.submit(fail).result(timeout=5)
    assert engine_thread.submit(lambda: 7).result(timeout=5) == 7  # the thread goes on


def test_rows_whose_documents_are_still_cached_run_first():
    """OpRunner.cached_first: the engine's prefix cache (asked on the engine thread) still
    holds some documents; their rows move ahead, every other order kept."""
    from quail_engine.exec.answer_cache import AnswerCache
    from quail_engine.exec.op_runner import OpRunner
    from quail_engine.exec.report import Report

    class Cached(FakeEngine):
        held = {"beta", "delta"}

        def cached_tokens(self, token_lists):
            assert threading.current_thread().name.startswith("quail-engine")
            return [16 if self.words[t[-1]] in self.held else 0 for t in token_lists]

    runner = OpRunner(Cached(), AnswerCache.in_dir(None), Report())
    docs = ["alpha", "beta", "gamma", "beta", "delta", "alpha"]
    assert runner.cached_first(list(range(6)), docs) == [1, 3, 4, 0, 2, 5]
    runner.engine.held = set()
    assert runner.cached_first(list(range(6)), docs) == list(range(6))


def _interval_after_first_call(env: dict) -> float:
    import os
    import subprocess
    import sys
    code = ("import sys; from quail_engine.exec import engine_thread; "
            "engine_thread.submit(lambda: None).result(timeout=60); print(sys.getswitchinterval())")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                         capture_output=True, text=True, timeout=300, check=True)
    return float(out.stdout)


def test_the_engine_thread_takes_the_gil_back_within_a_tenth_of_a_millisecond():
    # each torch launch of the worker lets go of the GIL; with CPython's 5 ms handoff, another
    # thread's Python would hold every launch of a pass up to that long
    assert _interval_after_first_call({"QUAIL_GIL_HANDOFF_MS": ""}) == pytest.approx(1e-4)
    assert _interval_after_first_call({"QUAIL_GIL_HANDOFF_MS": "0.5"}) == pytest.approx(5e-4)
    assert _interval_after_first_call({"QUAIL_GIL_HANDOFF_MS": "off"}) == pytest.approx(5e-3)


@pytest.mark.parametrize("raw", ["fast", "-1", "nan", "5000"])
def test_a_bad_handoff_setting_is_named(monkeypatch, raw):
    monkeypatch.setenv("QUAIL_GIL_HANDOFF_MS", raw)
    with pytest.raises(ValueError, match=f"QUAIL_GIL_HANDOFF_MS .*{raw!r}"):
        engine_thread.handoff_interval()
