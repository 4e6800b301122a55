"""The grammar masks' thread count: two by default (at most half the CPUs), QUAIL_GRAMMAR_THREADS
overrides, and a value that is not a positive whole number is an error that quotes it."""

from __future__ import annotations

import pytest

from quail_engine.errors import ExecutionError
from quail_engine.infer.grammar import GRAMMAR_THREADS, grammar_threads


@pytest.mark.parametrize("cpus,want", [(16, 2), (4, 2), (3, 1), (2, 1), (1, 1), (None, 1)])
def test_two_threads_at_most_half_the_cpus_unless_told(monkeypatch, cpus, want):
    monkeypatch.delenv("QUAIL_GRAMMAR_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: cpus)
    assert GRAMMAR_THREADS == 2 and grammar_threads() == want
    monkeypatch.setenv("QUAIL_GRAMMAR_THREADS", "6")
    assert grammar_threads() == 6


@pytest.mark.parametrize("raw", ["0", "-3", "two", "1.5"])
def test_a_bad_thread_count_is_named(monkeypatch, raw):
    monkeypatch.setenv("QUAIL_GRAMMAR_THREADS", raw)
    with pytest.raises(ExecutionError, match="QUAIL_GRAMMAR_THREADS") as err:
        grammar_threads()
    assert repr(raw) in str(err.value)


def test_the_masks_executor_gets_that_many_threads(monkeypatch):
    """The executor is built with grammar_threads()' count (llguidance's default pool of 80%
    of the CPUs computed a batch's masks slower on a 16-core GPU host)."""
    import llguidance

    from quail_engine.infer.grammar import GrammarMasks

    made = []

    class Recording:
        def __init__(self, num_threads=None):
            made.append(num_threads)

    monkeypatch.setenv("QUAIL_GRAMMAR_THREADS", "3")
    monkeypatch.setattr(llguidance, "LLExecutor", Recording)
    monkeypatch.setattr(llguidance, "LLTokenizer", lambda *a, **k: object())
    monkeypatch.setattr("quail_engine.infer.grammar.tokenizer_json", lambda tok: "{}")
    masks = GrammarMasks(None, [0])
    masks._lltokenizer(32)
    assert made == [3]
