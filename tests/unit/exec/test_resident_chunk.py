"""A filter chunk's resident documents are counted by the pages they hold: with prefix sharing,
a document that begins like the row before it holds only its own pages past that beginning
(QUAIL-B's agent traces: cumulative snapshots, 9 to a chunk when counted whole)."""

from types import SimpleNamespace

import pytest

from quail_engine.exec.filter_runner import FilterRunner, own_tokens
from quail_engine.exec.scans import ScanData
from quail_engine.plan.chunking import Chunking
from quail_engine.plan.filter_chunks import filter_run
from quail_engine.plan.sharing import common_prefix_len
from quail_engine.sql.ir import AiOp, Binding, binding_column

CHUNKING = Chunking()

PAGE = 64
ARENA_PAGES = 400  # 25,600 tokens; a chunk may hold a quarter: 6,400


def test_common_prefix_len():
    assert common_prefix_len("abcdef", "abcxyz") == 3
    assert common_prefix_len("abc", "abcdef") == 3
    assert common_prefix_len("", "abc") == 0
    assert common_prefix_len("x" * 20000 + "a", "x" * 20000 + "b") == 20000


def test_own_tokens_count_what_follows_the_shared_beginning():
    texts = ["turn one. ", "turn one. turn two. ", "turn one. turn two. turn three. ", "other"]
    full, own = own_tokens(texts, mean_tokens=10.0, page=0)
    per_char = 10.0 / (sum(map(len, texts)) / 4)
    assert full.tolist() == pytest.approx([len(t) * per_char for t in texts])
    assert own.tolist() == pytest.approx([10 * per_char, 10 * per_char, 12 * per_char,
                                          5 * per_char])
    _, paged = own_tokens(texts, mean_tokens=10.0, page=2)  # a shared row copies a last page
    assert paged.tolist() == pytest.approx([full[0], min(full[1], own[1] + 2),
                                            min(full[2], own[2] + 2), full[3]])


QUALIFIED = Binding(0, "t.trace", "t", "trace")


def _runner(rows: list[str], mean: float, sharing: bool, monkeypatch,
            binding: Binding = QUALIFIED) -> tuple:
    """(a FilterRunner on an arena of ARENA_PAGES pages, the scan, the plan's run of its one
    filter step as the planner makes it: plan/filter_chunks.filter_run)."""
    op = AiOp("ai_filter", "Is it done? {0}", (binding,), output_type="BOOLEAN")
    arena = SimpleNamespace(num_pages=ARENA_PAGES, page_size=PAGE)
    engine = SimpleNamespace(model=SimpleNamespace(arena=arena))
    runner = FilterRunner([op], SimpleNamespace(loaded_engine=lambda: engine,
                                                doc_kv=lambda: None), None)
    scan = ScanData("t", (binding_column(0, 0),), [{binding_column(0, 0): r} for r in rows])
    step = SimpleNamespace(op=0, is_read_once=False)
    run = filter_run("t", [step], (0,), lambda op: {0: mean}.get(op), sharing)
    return runner, scan, run


def test_snapshots_that_grow_fill_a_chunk_by_their_own_pages(monkeypatch):
    # 40 snapshots of one trace, each 100 characters (~100 tokens) more than the last
    rows = ["".join(f"step {i:04d} " + "x" * 89 for i in range(n)) for n in range(1, 41)]
    mean = sum(map(len, rows)) / len(rows)  # one token a character
    budget = ARENA_PAGES * PAGE * CHUNKING.chunk_share
    runner, scan, run = _runner(rows, mean, True, monkeypatch)
    shared = runner._chunk_rows(run, CHUNKING, scan, 0)
    runner, scan, run = _runner(rows, mean, False, monkeypatch)
    whole = runner._chunk_rows(run, CHUNKING, scan, 0)
    assert whole == int(budget / mean)  # counted whole: 6,400 / 2,050
    # counted by own pages: the first 100 tokens, then 100 + a page each: (6,400-100)/164 + 1
    assert shared == 39 > whole
    # from row 30: its 3,000 tokens whole, then 164 each
    assert runner._chunk_rows(run, CHUNKING, scan, 30) == whole
    runner, scan, run = _runner(rows, mean, True, monkeypatch)
    assert 3100 + 164 * 9 <= budget  # the 10 rows left fit
    assert runner._chunk_rows(run, CHUNKING, scan, 30) == 10


def test_documents_that_share_nothing_are_counted_whole(monkeypatch):
    # rows that share a character or two: a page copied costs more than their own tokens
    rows = [f"{i:03d} " + "y" * 96 for i in range(600)]
    runner, scan, run = _runner(rows, 100.0, True, monkeypatch)
    assert runner._chunk_rows(run, CHUNKING, scan, 0) == 64  # 6,400 / 100
    rows = [f"{i:03d} " + "y" * 6 for i in range(600)]  # short: the row cap binds
    runner, scan, run = _runner(rows, 10.0, True, monkeypatch)
    assert runner._chunk_rows(run, CHUNKING, scan, 0) == CHUNKING.filter_rows


def test_an_unqualified_binding_reads_its_scan_column(monkeypatch):
    # `FROM traces WHERE AI_FILTER(trace)`: the binding names no alias; its column is the scan's
    rows = ["".join(f"step {i:04d} " + "x" * 89 for i in range(n)) for n in range(1, 41)]
    mean = sum(map(len, rows)) / len(rows)
    runner, scan, run = _runner(rows, mean, True, monkeypatch, Binding(0, "trace"))
    assert runner._chunk_rows(run, CHUNKING, scan, 0) == 39
    full, own = own_tokens(["", ""], mean_tokens=50.0)  # nothing to measure: the mean
    assert full.tolist() == own.tolist() == [50.0, 50.0]
