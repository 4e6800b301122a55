"""Concurrent DuckDB calls of one AI function: the calls that queue while the engine answers
another are answered together in one engine call, each caller gets its own rows' answers, and
an error reaches every caller of its batch."""

import threading

import pytest

from quail_engine.exec.call_gather import GatheredCalls

WAIT = 60.0  # (generous: only a broken implementation waits this long)


def _until(cond) -> None:
    done = threading.Event()
    for _ in range(int(WAIT / 0.01)):
        if cond():
            return
        done.wait(0.01)
    raise AssertionError("timed out waiting")


class _Engine:
    """Answers a row with its text upper-cased; the first call waits until `release`."""

    def __init__(self, fail_on: str | None = None):
        self.calls: list[list[tuple]] = []
        self.started, self.release = threading.Event(), threading.Event()
        self.fail_on = fail_on

    def ask(self, rows):
        self.calls.append(list(rows))
        if len(self.calls) == 1:
            self.started.set()
            assert self.release.wait(WAIT)
        if self.fail_on is not None and any(r[0] == self.fail_on for r in rows):
            raise RuntimeError(f"no answer for {self.fail_on}")
        return [r[0].upper() for r in rows]


def _behind_a_busy_call(engine, parts):
    """`parts[0]` called first; the others called while the engine answers it, released once
    all of them queue. (results, errors) by caller."""
    gathered = GatheredCalls(engine.ask, threading.Lock())
    results, errors = {}, {}

    def call(i, rows):
        try:
            results[i] = gathered.answer(rows)
        except RuntimeError as exc:
            errors[i] = exc

    threads = [threading.Thread(target=call, args=(i, rows)) for i, rows in enumerate(parts)]
    threads[0].start()
    assert engine.started.wait(WAIT)
    for t in threads[1:]:
        t.start()
    _until(lambda: gathered.pending == len(parts) - 1)
    engine.release.set()
    for t in threads:
        t.join(WAIT)
    return results, errors


def test_calls_queued_during_an_engine_call_are_answered_in_the_next_one():
    engine = _Engine()
    parts = [[("a",)], [("b",), ("c",)], [("c",), ("d",)], [("e",)]]
    results, errors = _behind_a_busy_call(engine, parts)
    assert not errors
    assert results == {i: [r[0].upper() for r in rows] for i, rows in enumerate(parts)}
    # one call for the first, one for the three queued behind it (their distinct rows)
    assert engine.calls[0] == [("a",)]
    assert len(engine.calls) == 2 and sorted(engine.calls[1]) == [("b",), ("c",), ("d",), ("e",)]


def test_an_error_reaches_every_caller_of_its_batch_and_no_other():
    results, errors = _behind_a_busy_call(_Engine(fail_on="c"), [[("a",)], [("b",)], [("c",)]])
    assert results == {0: ["A"]}
    assert set(errors) == {1, 2} and all("no answer for c" in str(e) for e in errors.values())


def test_a_lone_call_is_answered_at_once():
    gathered = GatheredCalls(lambda rows: [len(r) for r in rows], threading.Lock())
    assert gathered.answer([("x", "y"), ("z",)]) == [2, 1]
    assert gathered.pending == 0
    with pytest.raises(ZeroDivisionError):
        GatheredCalls(lambda rows: [1 / 0], threading.Lock()).answer([("x",)])


def test_a_short_answer_list_is_an_error_for_its_callers_not_a_silent_gap():
    gathered = GatheredCalls(lambda rows: ["only one"], threading.Lock())
    with pytest.raises(ValueError):
        gathered.answer([("x",), ("y",)])
