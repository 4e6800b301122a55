"""`TokenLedger`: a bench-only engine wrapper that records every prompt the engine is asked (a
prefix's tokens once per distinct content, each request as that prefix plus its own tokens), so
a query's minimum work can be counted: every distinct prompt prefix once, as a perfect prefix
cache over the whole query would compute it (issue 15's "minimum tokens").

The minimum counts a token trie over the query's prompts: plain prompts and prefixes sorted
together (each adds its tokens past the longest prefix it shares with its sorted neighbour),
then, under each distinct prefix, its requests' own tokens the same way. Its `Work` gives the
speed of light of the minimum (plan/cost.request_work per trie segment), with a prefix's KV read
once for all the requests over it: they can run together (the prefix-attention kernel reads a
prefix's KV once for a tile of rows), so reading it once per request is not a lower bound (it
was counted so until 2026-12-02, which put BIO-2's speed of light at 2x its bound). Label tokens a
classification scores by teacher forcing are not prompts and are not in it (the minimum is the
prompts' alone). It also keeps a seeded sample of whole prompts for the transformers baseline
(bench/quailb/baseline.py)."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quail_engine.plan.cost import Work, request_work


def _key(tokens: Sequence[int]) -> bytes:
    """Big-endian uint32 bytes: byte order sorts like the token sequences."""
    return np.asarray(tokens, dtype=">u4").tobytes()


def _lcp(a: bytes, b: bytes) -> int:
    """Tokens two keys share at their start."""
    n = min(len(a), len(b)) // 4
    if n == 0:
        return 0
    x = np.frombuffer(a[:4 * n], dtype=">u4")
    y = np.frombuffer(b[:4 * n], dtype=">u4")
    diff = np.flatnonzero(x != y)
    return int(diff[0]) if len(diff) else n


def trie(keys: Sequence[bytes], base: int = 0) -> tuple[int, Work]:
    """(tokens, work) of a trie over `keys` (distinct token sequences as `_key` bytes), each
    sequence attending to `base` tokens before it, whose KV the work reads once for all."""
    tokens, work, previous, segments = 0, Work(), b"", 0
    for key in sorted(set(keys)):
        shared = _lcp(previous, key)
        new = len(key) // 4 - shared
        if new > 0:
            tokens += new
            work = work + request_work(base + shared, new, False)
            segments += 1
        previous = key
    if segments > 1 and base:  # request_work read the base's KV once per segment
        work = work + Work(kv_reads=-(segments - 1) * base)
    return tokens, work


@dataclass
class Minimum:
    prompts: int = 0          # requests seen
    requested_tokens: int = 0  # their prompt tokens, prefixes included
    tokens: int = 0           # distinct prefixes once
    work: Work = field(default_factory=Work)


class TokenLedger:
    """Forwards everything to the wrapped engine; records what `run` is asked. `start()`
    begins a new query's ledger, `minimum()` counts it."""

    def __init__(self, engine: Any, sample: int = 256, seed: int = 0):
        self._engine = engine
        self._sample_size, self._seed = sample, seed
        self._prefixes: dict[int, bytes] = {}  # handle id -> content key
        self.bench_s = 0.0  # time spent recording (not the product's: the bench subtracts it)
        self.start()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def start(self) -> None:
        self._plain: set[bytes] = set()
        self._under: dict[bytes, set[bytes]] = {}  # prefix content -> own-token keys
        self._requests, self._requested = 0, 0
        self._sample: list[tuple[bytes, bytes]] = []
        self._rng = random.Random(self._seed)

    def add_prefix(self, tokens: Sequence[int]):
        handle = self._engine.add_prefix(tokens)
        self._prefixes[handle.id] = _key(tokens)
        return handle

    def add_prefixes(self, token_lists: Sequence[Sequence[int]]):
        handles = self._engine.add_prefixes(token_lists)
        for handle, tokens in zip(handles, token_lists, strict=True):
            self._prefixes[handle.id] = _key(tokens)
        return handles

    def extend_prefixes(self, handles: Sequence[Any], tokens: Sequence[int]):
        extended = self._engine.extend_prefixes(handles, tokens)
        for old, handle in zip(handles, extended, strict=True):  # (keys concatenate)
            self._prefixes[handle.id] = self._prefixes.get(old.id, b"") + _key(tokens)
        return extended

    def run(self, requests: Sequence[Any]) -> list[Any]:
        t0 = time.perf_counter()
        self._record(requests)
        self.bench_s += time.perf_counter() - t0
        return self._engine.run(requests)

    def _record(self, requests: Sequence[Any]) -> None:
        for r in requests:
            own = _key(r.tokens)
            head = self._prefixes.get(r.prefix.id, b"") if r.prefix else b""
            if head:
                self._under.setdefault(head, set()).add(own)
            else:
                self._plain.add(own)
            self._requested += (len(head) + len(own)) // 4
            self._requests += 1
            # reservoir sample of whole prompts, for the baseline
            if len(self._sample) < self._sample_size:
                self._sample.append((head, own))
            else:
                j = self._rng.randrange(self._requests)
                if j < self._sample_size:
                    self._sample[j] = (head, own)

    def minimum(self) -> Minimum:
        tokens, work = trie([*self._plain, *self._under])
        for head, owns in self._under.items():
            t, w = trie(list(owns), base=len(head) // 4)
            tokens, work = tokens + t, work + w
        return Minimum(self._requests, self._requested, tokens, work)

    def sample(self) -> tuple[list[list[int]], int]:
        """(a uniform sample of the query's whole prompts as token lists, how many it had)."""
        out = [np.frombuffer(h + o, dtype=">u4").astype(np.int64).tolist()
               for h, o in self._sample]
        return out, self._requests
