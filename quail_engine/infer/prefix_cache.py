"""Prefix sharing across rows: sequences that begin alike compute their common beginning once.

`PrefixCache` puts a radix index (radix.py) over a page store (the CPU's pages of keys/values,
infer/kv_pages.py, or the GPU's paged arena, gpu/paged_kv.py). Before a batch runs, `warm`
computes and indexes the beginnings two or more of its sequences share (the forks among those
first, so a common instruction header is computed once too); then each sequence attends over
the longest cached chain of pages it begins with (`lookup`) and computes only the rest.

A beginning shared to the token, not to the page (a chat template and an instruction of a few
dozen tokens before each row's document: less than a GPU page of 64), is a batch's *tail*: the
tokens past its whole pages computed once (`warm`, after the pages), kept until `end_batch`,
and each row that begins with at least `MIN_TAIL` of them past its own cached pages starts from
a view of the tail's first tokens (`PageStore.view`; on the GPU its whole pages by reference and
the partial one copied into the row's first page). Tails are not indexed: a later batch
computes its own. Torch-free: the store builds the prefix objects the runner takes.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Sequence
from typing import Any, Protocol

from quail_engine.infer.radix import (
    RadixIndex,
    RadixNode,
    adjacent_shares,
    branch_points,
    common_prefix_length,
)

log = logging.getLogger(__name__)

# Tokens past a row's cached pages that a tail must save it: fewer are not worth a tail's
# pass and the copy of its partial page (a chat template's opening alone is 3-5 tokens).
MIN_TAIL = 8
# Tails are computed for a batch only where rows would read at least this share of their
# tokens from them.
MIN_TAIL_SHARE = 0.01


class PageStore(Protocol):
    page_size: int
    # What a row that reads a prefix pays beyond a fresh row's compute, as a share of its own
    # tokens (its attention over cached keys takes another path on some devices): a tail a
    # row would read instead of no pages at all must save it more than this costs.
    prefix_row_cost: float

    def pages_of(self, kv: Any, first: int, count: int) -> list[Any]:
        """Payloads of full pages first..first+count-1 of a computed sequence's KV."""
        ...

    def prefix(self, pages: Sequence[Any], num_tokens: int) -> Any:
        """The runner's prefix object over `pages` (`num_tokens` tokens, whole pages)."""
        ...

    def done(self, kv: Any) -> None:
        """A prefix object or stored KV from this store will not be read again."""
        ...

    def view(self, kv: Any, num_tokens: int) -> Any:
        """A prefix object over the first `num_tokens` tokens of computed KV `kv` (its own
        holder: `done` it apart from `kv`)."""
        ...


class PrefixCache:
    """`max_pages`: unpinned pages kept (None: until the store asks for room)."""

    def __init__(self, store: PageStore, max_pages: int | None = None, hold=None, drop=None):
        self.store = store
        self.page_size = store.page_size
        self.index = RadixIndex(store.page_size, max_pages, hold, drop)
        # within one batch: id(last node) or (id(tail KV), tokens) -> (owner, prefix object)
        self._memo: dict[Any, tuple[Any, Any]] = {}
        # this batch's tails: their KV, and under each page chain a tail runs through (its
        # last node, None for the root) the tail's next page of tokens with its position, sorted
        self._tail_kv: list[Any] = []
        self._tails_at: dict[RadixNode | None, list[tuple[tuple[int, ...], int]]] = {}
        self.hit_tokens = 0
        # QUAIL_PREFIX_TAILS=0: whole pages only, as before tails (for A/B runs)
        self.tails = os.environ.get("QUAIL_PREFIX_TAILS", "1") != "0"

    def lookup(self, tokens: Sequence[int], keep_last: bool = True
               ) -> tuple[list[RadixNode], Any]:
        """(chain, prefix object or None) for the longest cached beginning of `tokens`: the
        chain of whole pages it begins with, or a view of this batch's tail that it shares
        `MIN_TAIL` or more tokens beyond that chain with (the prefix object's `num_tokens` says
        where the sequence's own tokens start). With `keep_last` at least one token is left to
        compute. Sequences with the same beginning get the same prefix object until
        `end_batch` (the runner groups them by it)."""
        chain, k, start = self._beginning(tokens, len(tokens) - 1 if keep_last else len(tokens))
        self.hit_tokens += start
        if k < 0:
            return chain, self._chain_prefix(chain)
        kv = self._tail_kv[k]
        key = (id(kv), start)
        if key not in self._memo:
            self._memo[key] = (kv, self.store.view(kv, start))
        return chain, self._memo[key][1]

    def _beginning(self, tokens: Sequence[int], limit: int) -> tuple[list[RadixNode], int, int]:
        """(chain of cached pages, the tail to read or -1, tokens a lookup would not compute)
        for the first `limit` of `tokens`: a tail counts where it shares `MIN_TAIL` or more
        tokens past the chain."""
        chain = self.index.match(tokens, limit)
        start = chain[-1].num_tokens if chain else 0
        k, shared = self._tail_for(tokens, limit, chain)
        return (chain, k, shared) if shared - start >= MIN_TAIL else (chain, -1, start)

    def _chain_prefix(self, chain: list[RadixNode]) -> Any:
        """The prefix object over a chain of pages (None for none), one per chain a batch."""
        if not chain:
            return None
        key = id(chain[-1])
        if key not in self._memo:
            self._memo[key] = (chain[-1], self.store.prefix([n.page for n in chain],
                                                            chain[-1].num_tokens))
        return self._memo[key][1]

    def _tail_for(self, tokens: Sequence[int], limit: int, chain: list[RadixNode]
                  ) -> tuple[int, int]:
        """(position, tokens shared) of this batch's tail sharing the longest beginning with
        `tokens` (at most `limit`), whose cached pages are `chain`. A tail sharing more than
        the chain runs through the chain's last page (the same pages, the same node) and then
        shares less than a page with `tokens` (a whole one more would be cached): so only the
        next page's tokens are compared, against the tails under that node in sorted order,
        of which the two beside them share the most. The cost of a row is one page of
        tokens, not its length (agent traces run to tens of thousands)."""
        tails = self._tails_at.get(chain[-1] if chain else None)
        if not tails:
            return -1, 0
        start = chain[-1].num_tokens if chain else 0
        window = tuple(tokens[start:min(limit, start + self.page_size)])
        i = bisect.bisect_left(tails, (window,))
        best = (-1, 0)
        for j in (i - 1, i):
            if 0 <= j < len(tails):
                n = common_prefix_length(tails[j][0], window)
                if n > best[1]:
                    best = (tails[j][1], n)
        return best[0], start + best[1]

    def _covered(self, tokens: Sequence[int]) -> int:
        """Leading tokens of `tokens` a lookup would not compute (pages or a tail)."""
        return self._beginning(tokens, len(tokens))[2]

    def _add_tail(self, tokens: tuple[int, ...], kv: Any) -> None:
        """Make `tokens` (computed: `kv`) a tail of this batch, under each page of its chain."""
        k = len(self._tail_kv)
        self._tail_kv.append(kv)
        size = self.page_size
        for depth, node in enumerate([None, *self.index.match(tokens)]):
            window = tokens[depth * size:(depth + 1) * size]
            if window:
                bisect.insort(self._tails_at.setdefault(node, []), (window, k))

    def end_batch(self) -> None:
        for _, prefix in self._memo.values():
            self.store.done(prefix)
        self._memo.clear()
        for kv in self._tail_kv:
            self.store.done(kv)
        self._tail_kv, self._tails_at = [], {}

    def insert(self, tokens: Sequence[int], kv: Any) -> list[RadixNode]:
        """Index the full pages of a computed sequence (`kv` holds all of `tokens`' KV)."""
        num_pages = len(tokens) // self.page_size
        have = len(self.index.match(tokens, num_pages * self.page_size))
        pages = [None] * have + self.store.pages_of(kv, have, num_pages - have)
        return self.index.insert(tokens, pages)

    def warm(self, runner: Any, token_lists: Sequence[Sequence[int]], job_type: Any,
             keep_last: bool = True) -> None:
        """Compute what two or more of `token_lists` share and the cache lacks: the
        page-aligned beginnings, indexed (`_warm_pages`), then the tokens past them where the
        sequences share `MIN_TAIL` or more, as this batch's tails (`_warm_tails`).
        `job_type`: the runner's SeqJob class (this module imports no torch)."""
        shares = adjacent_shares(token_lists, keep_last)
        self._warm_pages(runner, token_lists, job_type, keep_last, shares)
        if self.tails:
            self._warm_tails(runner, token_lists, job_type, keep_last, shares)

    def _warm_pages(self, runner: Any, token_lists: Sequence[Sequence[int]], job_type: Any,
                    keep_last: bool, shares: list[tuple[int, int]] | None = None) -> None:
        """Compute and index every page-aligned beginning that two or more of `token_lists`
        share and the index lacks, in as few passes as the forks among them allow."""
        todo = []
        for i, n in branch_points(token_lists, self.page_size, keep_last, shares):
            target = list(token_lists[i][:n])
            if len(self.index.match(target)) * self.page_size < n:
                todo.append(target)
        if not todo:
            return
        if len(todo) > 1:
            self._warm_pages(runner, todo, job_type, keep_last=False)
        jobs = []
        for target in todo:
            chain = self.index.match(target)
            start = chain[-1].num_tokens if chain else 0
            jobs.append(job_type(tokens=target[start:], prefix=self._chain_prefix(chain),
                                 read=(), store_kv=True))
        runner.run(jobs)
        for target, job in zip(todo, jobs):
            self.insert(target, job.kv)
            self.store.done(job.kv)
        log.debug("shared beginnings: computed %d (%d tokens)", len(todo),
                  sum(len(j.tokens) for j in jobs))

    def _warm_tails(self, runner: Any, token_lists: Sequence[Sequence[int]], job_type: Any,
                    keep_last: bool, shares: list[tuple[int, int]] | None = None) -> None:
        """Compute, as tails, the longest beginnings two or more of `token_lists` share where
        they run `MIN_TAIL` or more tokens past what the cache holds (a shorter beginning of a
        tail is read from it: a view of its first tokens). Tails that share a beginning of
        their own have it computed first, as `_warm_pages` does with forks."""
        todo: list[tuple[int, ...]] = []
        seen: set[tuple[int, ...]] = set()
        if shares is None:
            shares = adjacent_shares(token_lists, keep_last)
        # (a share of fewer than MIN_TAIL tokens past its whole pages, which the pages'
        # warm-up computed, is no tail: dropped before the longest of nested ones is kept)
        size = self.page_size
        shares = [(i, n) for i, n in shares if n % size >= MIN_TAIL]
        # (about what the rows would read from tails, less what rows that would otherwise
        # read no pages pay for reading a prefix at all: where that is a small share of their
        # tokens, agent traces of thousands sharing their beginnings, finding and computing
        # the tails costs more than the passes save)
        saved = sum(n % size for _, n in shares)
        cost = self.store.prefix_row_cost * sum(len(token_lists[i]) for i, n in shares
                                                if n < size)
        if saved - cost < MIN_TAIL_SHARE * sum(map(len, token_lists)):
            return
        for i, n in branch_points(token_lists, 1, keep_last, shares):
            target = tuple(token_lists[i][:n])
            if target not in seen and n - self._covered(target) >= MIN_TAIL:
                seen.add(target)
                todo.append(target)
        if len(todo) > 1:
            self._warm_tails(runner, todo, job_type, keep_last=False)
            todo = [t for t in todo if len(t) - self._covered(t) >= MIN_TAIL]
        if not todo:
            return
        jobs = []
        for target in todo:
            _, prefix = self.lookup(target, keep_last=False)
            start = prefix.num_tokens if prefix is not None else 0
            self.hit_tokens -= start  # (not a request's hit)
            jobs.append(job_type(tokens=list(target[start:]), prefix=prefix, read=(),
                                 store_kv=True))
        runner.run(jobs)
        for target, job in zip(todo, jobs):
            self._add_tail(target, job.kv)
        log.debug("shared tails: computed %d (%d tokens)", len(todo),
                  sum(len(j.tokens) for j in jobs))
