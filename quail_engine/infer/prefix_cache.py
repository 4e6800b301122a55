"""Prefix sharing across rows: sequences that begin alike compute their common beginning once.

`PrefixCache` puts a radix index (radix.py) over a page store (the CPU's pages of keys/values,
infer/kv_pages.py, or the GPU's paged arena, gpu/paged_kv.py). Before a batch runs, `warm`
computes and indexes the beginnings two or more of its sequences share (the forks among those
first, so a common instruction header is computed once too); then each sequence attends over
the longest cached chain of pages it begins with (`lookup`) and computes only the rest, its
partial last page included. Torch-free: the store builds the prefix objects the runner takes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from quail_engine.infer.radix import RadixIndex, RadixNode, branch_points

log = logging.getLogger(__name__)


class PageStore(Protocol):
    page_size: int

    def pages_of(self, kv: Any, first: int, count: int) -> list[Any]:
        """Payloads of full pages first..first+count-1 of a computed sequence's KV."""
        ...

    def prefix(self, pages: Sequence[Any], num_tokens: int) -> Any:
        """The runner's prefix object over `pages` (`num_tokens` tokens, whole pages)."""
        ...

    def done(self, kv: Any) -> None:
        """A prefix object or stored KV from this store will not be read again."""
        ...


class PrefixCache:
    """`max_pages`: unpinned pages kept (None: until the store asks for room)."""

    def __init__(self, store: PageStore, max_pages: int | None = None, hold=None, drop=None):
        self.store = store
        self.page_size = store.page_size
        self.index = RadixIndex(store.page_size, max_pages, hold, drop)
        self._memo: dict[int, Any] = {}  # id(last node) -> prefix object, within one batch
        self.hit_tokens = 0

    def lookup(self, tokens: Sequence[int], keep_last: bool = True
               ) -> tuple[list[RadixNode], Any]:
        """(chain, prefix object or None) for the longest cached beginning of `tokens`; with
        `keep_last` at least one token is left to compute. Sequences with the same chain get
        the same prefix object until `end_batch` (the runner groups them by it)."""
        chain = self.index.match(tokens, len(tokens) - 1 if keep_last else None)
        if not chain:
            return chain, None
        key = id(chain[-1])
        if key not in self._memo:
            self._memo[key] = (chain[-1], self.store.prefix([n.page for n in chain],
                                                            chain[-1].num_tokens))
        self.hit_tokens += chain[-1].num_tokens
        return chain, self._memo[key][1]

    def end_batch(self) -> None:
        for _, prefix in self._memo.values():
            self.store.done(prefix)
        self._memo.clear()

    def insert(self, tokens: Sequence[int], kv: Any) -> list[RadixNode]:
        """Index the full pages of a computed sequence (`kv` holds all of `tokens`' KV)."""
        num_pages = len(tokens) // self.page_size
        have = len(self.index.match(tokens, num_pages * self.page_size))
        pages = [None] * have + self.store.pages_of(kv, have, num_pages - have)
        return self.index.insert(tokens, pages)

    def warm(self, runner: Any, token_lists: Sequence[Sequence[int]], job_type: Any,
             keep_last: bool = True) -> None:
        """Compute and index every page-aligned beginning that two or more of `token_lists`
        share and the index lacks, in as few passes as the forks among them allow.
        `job_type`: the runner's SeqJob class (this module imports no torch)."""
        todo = []
        for i, n in branch_points(token_lists, self.page_size, keep_last):
            target = list(token_lists[i][:n])
            if len(self.index.match(target)) * self.page_size < n:
                todo.append(target)
        if not todo:
            return
        if len(todo) > 1:
            self.warm(runner, todo, job_type, keep_last=False)
        jobs = []
        for target in todo:
            chain, prefix = self.lookup(target, keep_last=False)
            self.hit_tokens -= chain[-1].num_tokens if chain else 0  # not a request's hit
            start = chain[-1].num_tokens if chain else 0
            jobs.append(job_type(tokens=target[start:], prefix=prefix, read=(), store_kv=True))
        runner.run(jobs)
        for target, job in zip(todo, jobs):
            self.insert(target, job.kv)
            self.store.done(job.kv)
        log.debug("shared beginnings: computed %d (%d tokens)", len(todo),
                  sum(len(j.tokens) for j in jobs))
