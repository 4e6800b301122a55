"""The benchmark's selectivity override (issue 15, item 2), a bench-only engine wrapper.

Random weights answer at random, which makes every plan unrealistic. `SelectivityOverride`
wraps an engine: it runs every request on the wrapped engine first (all model work happens and
the answer logits are computed), then replaces each boolean answer of a QUAIL-B predicate by a
seeded draw at that predicate's published selectivity (quail_testing/quailb/prompts.py, from the
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

from quail_testing.quailb import prompts as P

_SPACE = re.compile(r"\s+")
log = logging.getLogger("bench.quailb")


def _squash(text: str) -> str:
    return _SPACE.sub("", text)


def marker(template: str) -> tuple[str, ...]:
    """The template's fixed pieces between its `{0}`/`{1}` slots, whitespace removed: a
    request whose decoded text holds them all asks this predicate."""
    return tuple(q for q in (_squash(p) for p in re.split(r"\{\d\}", template)) if len(q) > 1)


def _find(markers: Any, text: str | Callable[[str], bool]) -> tuple[str, ...] | None:
    """The marker all of whose pieces are in `text` (or for which `text(piece)` holds), the
    longest when several are; else the one marker whose first piece is (the default model's
    pair layout keeps a question's text only up to the partner's slot); None when none or
    several (SUPPORT and REFUTE then read alike)."""
    has = text.__contains__ if isinstance(text, str) else text
    found = [m for m in markers if all(has(piece) for piece in m)]
    if found:
        return max(found, key=lambda m: sum(map(len, m)))
    first = [m for m in markers if m and has(m[0])]
    return first[0] if len(first) == 1 else None


@dataclass
class _Prompt:
    """A request's squashed text: its prefix's part (`pid`, decoded once per prefix) and its
    own tokens' part."""
    pid: int | None
    head: str
    own: str


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
        self._head_pieces: dict[int, set[str]] = {}  # handle id -> marker pieces in its text
        self._head_hash: dict[int, dict] = {}  # handle id -> (marker, salt) -> hash state
        self.bench_s = 0.0  # time spent drawing (not the product's: the bench subtracts it)
        self.override_stats = OverrideStats()
        self._booleans = {marker(t): p for t, p in {**P.FILTER_SELECTIVITY,
                                                     **P.JOIN_SELECTIVITY}.items()}
        self._labels = {marker(t): (accepted, p)
                        for (t, accepted), p in P.IN_LIST_SELECTIVITY.items()}
        self._pieces = {p for m in (*self._booleans, *self._labels) for p in m}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def add_prefix(self, tokens: Sequence[int]):
        handle = self._engine.add_prefix(tokens)
        self._prefix_tokens[handle.id] = tuple(tokens)
        self._forget(handle.id)
        return handle

    def add_prefixes(self, token_lists: Sequence[Sequence[int]]):
        handles = self._engine.add_prefixes(token_lists)
        for handle, tokens in zip(handles, token_lists, strict=True):
            self._prefix_tokens[handle.id] = tuple(tokens)
            self._forget(handle.id)
        return handles

    def extend_prefixes(self, handles: Sequence[Any], tokens: Sequence[int]):
        extended = self._engine.extend_prefixes(handles, tokens)
        for old, handle in zip(handles, extended, strict=True):
            self._prefix_tokens[handle.id] = self._prefix_tokens.get(old.id, ()) + tuple(tokens)
            self._forget(handle.id)
        return extended

    def _forget(self, pid: int) -> None:
        """A handle id registered anew: nothing cached of an earlier prefix under it."""
        self._prefix_text.pop(pid, None)
        self._head_pieces.pop(pid, None)
        self._head_hash.pop(pid, None)

    def run(self, requests: Sequence[Any]) -> list[Any]:
        answers = self._engine.run(requests)  # the model's work, logits included
        t0 = time.perf_counter()
        try:
            return [self._override(r, a) for r, a in zip(requests, answers, strict=True)]
        finally:
            self.bench_s += time.perf_counter() - t0

    # -- the draw

    def _text(self, request: Any) -> _Prompt:
        decode = self._decode or self._engine.codec.tokenizer.decode
        pid, head = None, ""
        if request.prefix:  # a join's anchor is read by many requests: decoded once
            pid = request.prefix.id
            if pid not in self._prefix_text:
                self._prefix_text[pid] = _squash(decode(list(self._prefix_tokens.get(pid, ()))))
            head = self._prefix_text[pid]
        return _Prompt(pid, head, _squash(decode(list(request.tokens))))

    def _contains(self, prompt: _Prompt) -> Callable[[str], bool]:
        """Whether a marker piece is in the prompt's text, scanning a long prefix once: a piece
        is in head + own iff it is in head, or in the last len(piece) - 1 characters of head
        followed by own."""
        if prompt.pid is None:
            return prompt.own.__contains__
        found = self._head_pieces.get(prompt.pid)
        if found is None:
            found = self._head_pieces[prompt.pid] = {p for p in self._pieces if p in prompt.head}
        return lambda piece: piece in found or piece in prompt.head[1 - len(piece):] + prompt.own

    def _uniform(self, key: tuple[str, ...], prompt: _Prompt, salt: str = "") -> float:
        """A uniform draw from the seed, the predicate, `salt` and the prompt's whole text (the
        hash of a prefix's part is computed once and continued with each request's own)."""
        states = self._head_hash.setdefault(prompt.pid, {}) if prompt.pid is not None else {}
        state = states.get((key, salt))
        if state is None:
            start = "\0".join((str(self._seed), *key, salt, prompt.head))
            state = states[(key, salt)] = hashlib.blake2b(start.encode(), digest_size=8)
        digest = state.copy()
        digest.update(prompt.own.encode())
        return int.from_bytes(digest.digest(), "big") / 2.0 ** 64

    def _override(self, request: Any, answer: Any) -> Any:
        value = answer.value
        if isinstance(value, bool):
            text = self._text(request)
            key = _find(self._booleans, self._contains(text))
            if key is None:
                log.debug("no QUAIL-B predicate in %r", text.head + text.own)
                self.override_stats.unmatched_boolean += 1
                return answer
            self._count(key)
            return replace(answer, value=self._uniform(key, text) < self._booleans[key])
        labels = getattr(request.readout, "labels", None)
        if isinstance(value, str) and labels:
            text = self._text(request)
            key = _find(self._labels, self._contains(text))
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
