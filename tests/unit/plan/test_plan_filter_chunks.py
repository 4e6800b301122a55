"""How a relation's filters run over chunks of its rows and when the carry is flushed
(plan/filter_chunks.py): decided by the planner, applied by the executor to what it observes."""

from types import SimpleNamespace

import pytest

from quail_engine.plan.chunking import Chunking
from quail_engine.plan.filter_chunks import (
    FLUSH_END,
    FLUSH_OUTGROWN,
    FilterRun,
    carry_flushes,
    filter_run,
)

C = Chunking()


def _step(op, read_once=False):
    return SimpleNamespace(op=op, is_read_once=read_once)


FILTER_RUN_CASES = [
    # (steps (op, read once), tokens by op, sharing) -> (resident, sized by, tokens, shared)
    ([(0, False), (1, False)], {0: 50.0, 1: 200.0}, True, (True, 1, 200.0, True)),
    ([(0, False), (1, False)], {0: 80.0, 1: 80.0}, False, (True, 0, 80.0, False)),  # first
    ([(0, True)], {0: 80.0}, True, (False, 0, 80.0, True)),   # read once: one chunk
    ([(0, False), (1, False)], {1: 30.0}, True, (True, 1, 30.0, True)),  # #0 unestimated
    ([(0, False)], {}, True, (True, None, 0.0, False)),
]


@pytest.mark.parametrize("steps,tokens,sharing,expected", FILTER_RUN_CASES)
def test_filter_run(steps, tokens, sharing, expected):
    run = filter_run("r", [_step(op, once) for op, once in steps], range(len(steps)),
                     tokens.get, sharing)
    assert (run.is_resident, run.sized_by, run.doc_tokens, run.counts_shared) == expected


ROWS_CASES = [
    # (run, num rows, arena known, capacity, own tokens, first) -> rows of the next chunk
    (FilterRun("r", (0,), False), 1000, True, 6400, None, 0.0, 1000),  # every row at once
    (FilterRun("r", (0,), True, 0, 100.0), 1000, False, None, None, 0.0, C.first_filter_rows),
    (FilterRun("r", (0,), True, 0, 100.0), 1000, True, None, None, 0.0, C.filter_rows),
    (FilterRun("r", (0,), True, 0, 100.0), 1000, True, 25600, None, 0.0, 64),  # 6,400 / 100
    (FilterRun("r", (0,), True, 0, 100.0, True), 1000, True, 25600, [100.0] + [164.0] * 60,
     0.0, 39),                                                  # own pages past the shared part
]


@pytest.mark.parametrize("run,num_rows,known,capacity,tokens,first,expected", ROWS_CASES)
def test_filter_run_rows(run, num_rows, known, capacity, tokens, first, expected):
    assert run.rows(C, num_rows, known, capacity, tokens, first) == expected


@pytest.mark.parametrize("early,expected", [
    (None, ()),                                 # never asked early: the join encodes again
    ("pair", (FLUSH_OUTGROWN,)),
    ("leading", (FLUSH_OUTGROWN,)),
    ("star", (FLUSH_OUTGROWN, FLUSH_END)),      # a star's joins read the carried rows alone
])
def test_carry_flushes(early, expected):
    assert carry_flushes(early, "star") == expected


def test_explain_lines():
    assert FilterRun("r", (0,), True, 1, 120.0, True).text() == (
        "filter chunks r: sized by #1's documents (120 tokens, past shared beginnings); "
        "first_filter_rows until the arena is known")
    assert FilterRun("r", (0,), True, 1, 120.0, False).text() == (
        "filter chunks r: sized by #1's documents (120 tokens); first_filter_rows until the "
        "arena is known")
