"""Beginnings shared to the token, not to the page (prefix_cache.PrefixCache's tails): a batch
whose rows share a chat template and an instruction shorter than a page computes them once, and
every row starts after them. A fake page store and runner stand in for the engine's: each KV is
the tuple of tokens it holds, so what a pass computed and what a row reads are plain to see."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quail_engine.infer.prefix_cache import MIN_TAIL, PrefixCache


@dataclass
class KV:
    tokens: tuple[int, ...]

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)


@dataclass
class Job:
    tokens: list[int]
    prefix: Any = None
    read: tuple = (-1,)
    store_kv: bool = False
    kv: Any = None


class Store:
    def __init__(self, page_size: int, prefix_row_cost: float = 0.0):
        self.page_size = page_size
        self.prefix_row_cost = prefix_row_cost
        self.made: list[KV] = []  # every prefix object or KV handed out
        self.done_ids: list[int] = []

    def _new(self, tokens) -> KV:
        kv = KV(tuple(tokens))
        self.made.append(kv)
        return kv

    def pages_of(self, kv, first, count):
        size = self.page_size
        return [kv.tokens[i * size:(i + 1) * size] for i in range(first, first + count)]

    def prefix(self, pages, num_tokens):
        return self._new(t for page in pages for t in page)

    def done(self, kv):
        self.done_ids.append(id(kv))

    def view(self, kv, num_tokens):
        return self._new(kv.tokens[:num_tokens])


class Runner:
    def __init__(self, store: Store):
        self.store = store
        self.passes: list[list[tuple[tuple[int, ...], tuple[int, ...]]]] = []

    def run(self, jobs):
        self.passes.append([(j.prefix.tokens if j.prefix else (), tuple(j.tokens)) for j in jobs])
        for j in jobs:
            if j.store_kv:
                j.kv = self.store._new((j.prefix.tokens if j.prefix else ()) + tuple(j.tokens))


def _seq(*parts) -> list[int]:
    return [t for part in parts for t in part]


T = list(range(1000, 1030))  # a template and an instruction: 30 tokens, under a page of 64
A, B = list(range(2000, 2010)), list(range(3000, 3010))


def test_rows_sharing_less_than_a_page_read_it_from_one_computed_tail():
    store = Store(64)
    cache, runner = PrefixCache(store), Runner(store)
    rows = [_seq(T, [7, 8, 9]), _seq(T, [5, 6]), _seq(T, [4, 4, 4, 4])]
    cache.warm(runner, rows, Job)
    assert runner.passes == [[((), tuple(T))]]  # the shared 30 tokens, once
    starts = []
    for row in rows:
        _, prefix = cache.lookup(row)
        assert prefix.tokens == tuple(T)
        starts.append(prefix.num_tokens)
    assert starts == [30, 30, 30] and cache.hit_tokens == 90
    cache.end_batch()
    assert sorted(store.done_ids) == sorted(id(kv) for kv in store.made)  # nothing kept


def test_tails_that_share_a_beginning_have_it_computed_first():
    """Rows in two groups (the same template, two instructions): the template is computed
    once, each instruction once after it, and each row starts after its group's."""
    store = Store(64)
    cache, runner = PrefixCache(store), Runner(store)
    rows = [_seq(T, A, [1]), _seq(T, A, [2]), _seq(T, B, [1]), _seq(T, B, [2])]
    cache.warm(runner, rows, Job)
    assert runner.passes == [[((), tuple(T))],
                             [(tuple(T), tuple(A)), (tuple(T), tuple(B))]]
    for row in rows:
        _, prefix = cache.lookup(row)
        assert list(prefix.tokens) == row[:40]
    cache.end_batch()
    assert sorted(store.done_ids) == sorted(id(kv) for kv in store.made)


def test_a_tail_starts_after_the_whole_pages_and_shorter_shares_stay_pages():
    """Past whole pages a tail computes only the rest; a share of fewer than MIN_TAIL tokens
    past a row's pages is no tail (its pass and the partial page's copy cost more)."""
    store = Store(16)
    cache, runner = PrefixCache(store), Runner(store)
    shared = list(range(16 + MIN_TAIL + 2))  # a page and MIN_TAIL + 2 more
    rows = [shared + [90], shared + [91]]
    cache.warm(runner, rows, Job)
    assert runner.passes == [[((), tuple(shared[:16]))],
                             [(tuple(shared[:16]), tuple(shared[16:]))]]
    assert all(cache.lookup(r)[1].num_tokens == len(shared) for r in rows)
    cache.end_batch()

    short = list(range(500, 516 + MIN_TAIL - 1))  # a page and MIN_TAIL - 1 more
    runner.passes.clear()
    rows = [short + [90], short + [91]]
    cache.warm(runner, rows, Job)
    assert runner.passes == [[((), tuple(short[:16]))]]
    assert all(cache.lookup(r)[1].num_tokens == 16 for r in rows)
    cache.end_batch()


def test_a_row_keeps_its_last_token_to_compute():
    store = Store(64)
    cache, runner = PrefixCache(store), Runner(store)
    rows = [T + [1], list(T)]  # the second is the first's beginning, whole
    cache.warm(runner, rows, Job)
    assert runner.passes == [[((), tuple(T[:-1]))]]
    assert [cache.lookup(row)[1].num_tokens for row in rows] == [29, 29]
    cache.end_batch()


def test_no_tails_where_they_would_save_a_sliver_of_the_rows():
    """Rows of thousands of tokens that share a beginning just past a page (agent traces):
    under MIN_TAIL_SHARE of their tokens would come from tails, so none is computed (finding
    them costs the host more than the passes save)."""
    from quail_engine.infer.prefix_cache import MIN_TAIL_SHARE

    store = Store(64)
    cache, runner = PrefixCache(store), Runner(store)
    shared = list(range(64 + 20))  # a page and 20 tokens
    rows = [shared + [9000 + i] * 4000 for i in range(4)]
    assert 3 * 20 < MIN_TAIL_SHARE * sum(map(len, rows))
    cache.warm(runner, rows, Job)
    assert runner.passes == [[((), tuple(shared[:64]))]]  # the page only
    assert all(cache.lookup(r)[1].num_tokens == 64 for r in rows)
    cache.end_batch()


def test_no_tails_where_reading_a_prefix_costs_the_rows_more_than_they_save():
    """On the GPU a row over cached keys pays for the merged attention path (the store's
    `prefix_row_cost` of its tokens): a 30-token template before 300-token documents saves
    each row less than that, so rows that would read no pages get no tail. Rows that read a
    page anyway pay nothing more for its tail, which is computed."""
    doc = [list(range(5000 + 300 * i, 5300 + 300 * i)) for i in range(3)]
    store = Store(64, prefix_row_cost=0.16)
    cache, runner = PrefixCache(store), Runner(store)
    rows = [_seq(T, d) for d in doc]
    assert 30 < 0.16 * len(rows[0])
    cache.warm(runner, rows, Job)
    assert runner.passes == []
    assert all(cache.lookup(r)[1] is None for r in rows)
    cache.end_batch()

    page = list(range(100, 164))  # a whole page before the template: rows read it anyway
    cache, runner = PrefixCache(store), Runner(store)
    rows = [_seq(page, T, d) for d in doc]
    cache.warm(runner, rows, Job)
    assert runner.passes == [[((), tuple(page))], [(tuple(page), tuple(T))]]
    assert all(cache.lookup(r)[1].num_tokens == 64 + 30 for r in rows)
    cache.end_batch()
