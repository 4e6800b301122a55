"""The cyclic collector runs less often while a statement executes, and the caller's thresholds
come back afterwards, also after an error, when statements nest, and when threads overlap."""

import gc
import threading

import pytest

from quail_engine.exec.gc_tuning import FIRST_GENERATION, relaxed_gc


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_relaxed_inside_restored_after(thresholds):
    with relaxed_gc():
        assert gc.get_threshold() == (FIRST_GENERATION, 10, 10)
        with relaxed_gc():
            assert gc.get_threshold()[0] == FIRST_GENERATION
        assert gc.get_threshold()[0] == FIRST_GENERATION  # the outer statement still runs
    assert gc.get_threshold() == (700, 10, 10)
    with pytest.raises(RuntimeError), relaxed_gc():
        raise RuntimeError("a failed statement")
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_threads_restore_once_the_last_ends(thresholds):
    inside, release = threading.Event(), threading.Event()

    def statement():
        with relaxed_gc():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=statement)
    t.start()
    inside.wait(5)
    with relaxed_gc():
        pass
    assert gc.get_threshold()[0] == FIRST_GENERATION  # the thread's statement still runs
    release.set()
    t.join(5)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_caller_that_turned_collection_off_keeps_it_off(thresholds):
    gc.set_threshold(0)
    with relaxed_gc():
        assert gc.get_threshold()[0] == 0
    assert gc.get_threshold()[0] == 0


def test_a_statement_runs_relaxed():
    from exec_fakes import FakeEngine, bfilter, filters_query, review_db

    from quail_engine.exec.session import QuailSession
    from quail_engine.plan.cost import DeviceSpec

    seen = []

    class Watching(FakeEngine):
        def run(self, requests):
            seen.append(gc.get_threshold()[0])
            return super().run(requests)

    parsed = filters_query((bfilter("Mentions PRICE?"),), where=(0,), project=())
    s = QuailSession(review_db([(1, "the price", 1), (2, "no", 1)], [(1, "widget")]), Watching,
                     device_spec=DeviceSpec("toy", 1e11, 2e10))
    s.parse = lambda sql, dialect: parsed
    before = gc.get_threshold()
    s.execute(parsed.duckdb_sql)
    assert seen and set(seen) == {max(FIRST_GENERATION, before[0])}
    assert gc.get_threshold() == before
