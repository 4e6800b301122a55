"""The benchmark's selectivity override (issue 15, item 2), a bench-only engine wrapper.

Random weights answer at random, which makes every plan unrealistic. `SelectivityOverride`
wraps an engine: it runs every request on the wrapped engine first (all model work happens and
the answer logits are computed), then replaces each boolean answer of a QUAIL-B predicate by a
seeded draw at that predicate's published selectivity (bench/quailb/prompts.py, from the
benchmark's quail_b/queries.py), and each label of a classification that a query filters with
`IN (...)` by a draw that lands in the accepted labels at the published rate. A draw depends only
on the seed, the predicate and the request's text, so the same row gets the same answer in any
batch. Requests of no known predicate are returned as computed.

Only bench code constructs it; the product never does. Use a separate answer cache with it: the
answers it returns are not the model's."""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bench.quailb import prompts as P

_SPACE = re.compile(r"\s+")
log = logging.getLogger("bench.quailb")


def _squash(text: str) -> str:
    return _SPACE.sub("", text)


def marker(template: str) -> tuple[str, ...]:
    """The template's fixed pieces between its `{0}`/`{1}` slots, whitespace removed: a
    request whose decoded text holds them all asks this predicate."""
    return tuple(q for q in (_squash(p) for p in re.split(r"\{\d\}", template)) if len(q) > 1)


def _find(markers: Any, text: str) -> tuple[str, ...] | None:
    """The marker all of whose pieces are in `text`, the longest when several are; else the one
    marker whose first piece is (the default model's pair layout keeps a question's text only
    up to the partner's slot); None when none or several (SUPPORT and REFUTE then read alike)."""
    found = [m for m in markers if all(piece in text for piece in m)]
    if found:
        return max(found, key=lambda m: sum(map(len, m)))
    first = [m for m in markers if m and m[0] in text]
    return first[0] if len(first) == 1 else None


@dataclass
class OverrideStats:
    replaced: dict[str, int] = field(default_factory=dict)  # predicate's longest piece -> answers
    unmatched_boolean: int = 0


class SelectivityOverride:
    """An engine whose boolean (and filtered-label) answers are seeded draws at the benchmark's
    selectivities, computed after the wrapped engine answered; everything else is forwarded."""

    def __init__(self, engine: Any, seed: int = 0,
                 decode: Callable[[Sequence[int]], str] | None = None):
        self._engine = engine
        self._seed = seed
        self._decode = decode
        self._prefix_tokens: dict[int, tuple[int, ...]] = {}
        self._prefix_text: dict[int, str] = {}  # handle id -> its decoded text, once
        self.bench_s = 0.0  # time spent drawing (not the product's: the bench subtracts it)
        self.override_stats = OverrideStats()
        self._booleans = {marker(t): p for t, p in {**P.FILTER_SELECTIVITY,
                                                     **P.JOIN_SELECTIVITY}.items()}
        self._labels = {marker(t): (accepted, p)
                        for (t, accepted), p in P.IN_LIST_SELECTIVITY.items()}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def add_prefix(self, tokens: Sequence[int]):
        handle = self._engine.add_prefix(tokens)
        self._prefix_tokens[handle.id] = tuple(tokens)
        self._prefix_text.pop(handle.id, None)
        return handle

    def add_prefixes(self, token_lists: Sequence[Sequence[int]]):
        handles = self._engine.add_prefixes(token_lists)
        for handle, tokens in zip(handles, token_lists, strict=True):
            self._prefix_tokens[handle.id] = tuple(tokens)
            self._prefix_text.pop(handle.id, None)
        return handles

    def run(self, requests: Sequence[Any]) -> list[Any]:
        answers = self._engine.run(requests)  # the model's work, logits included
        t0 = time.perf_counter()
        try:
            return [self._override(r, a) for r, a in zip(requests, answers, strict=True)]
        finally:
            self.bench_s += time.perf_counter() - t0

    # -- the draw

    def _text(self, request: Any) -> str:
        decode = self._decode or self._engine.codec.tokenizer.decode
        head = ""
        if request.prefix:  # a join's anchor is read by many requests: decoded once
            pid = request.prefix.id
            if pid not in self._prefix_text:
                self._prefix_text[pid] = _squash(decode(list(self._prefix_tokens.get(pid, ()))))
            head = self._prefix_text[pid]
        return head + _squash(decode(list(request.tokens)))

    def _uniform(self, key: tuple[str, ...], text: str, salt: str = "") -> float:
        seed = "\0".join((str(self._seed), *key, salt, text))
        digest = hashlib.blake2b(seed.encode(), digest_size=8)
        return int.from_bytes(digest.digest(), "big") / 2.0 ** 64

    def _override(self, request: Any, answer: Any) -> Any:
        value = answer.value
        if isinstance(value, bool):
            text = self._text(request)
            key = _find(self._booleans, text)
            if key is None:
                log.debug("no QUAIL-B predicate in %r", text)
                self.override_stats.unmatched_boolean += 1
                return answer
            self._count(key)
            return replace(answer, value=self._uniform(key, text) < self._booleans[key])
        labels = getattr(request.readout, "labels", None)
        if isinstance(value, str) and labels:
            text = self._text(request)
            key = _find(self._labels, text)
            if key is None:
                return answer
            accepted, p = self._labels[key]
            inside = [label for label in labels if label in accepted]
            outside = [label for label in labels if label not in accepted]
            pool = inside if (self._uniform(key, text) < p and inside) or not outside else outside
            self._count(key)
            pick = pool[int(self._uniform(key, text, "pick") * len(pool))]
            return replace(answer, value=pick)
        return answer

    def _count(self, key: tuple[str, ...]) -> None:
        name = max(key, key=len)[:48]
        self.override_stats.replaced[name] = self.override_stats.replaced.get(name, 0) + 1
