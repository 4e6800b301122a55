"""The body of one Ray actor: an engine replica (infer/factory.py) and its KV arena.

The driver (ray_engine.RayEngine) sends it, in one call per batch, the prefixes to encode and
keep, the requests to answer and the ids of prefixes it no longer needs (so neither a prefix nor
a release costs a round trip of its own).
Every call returns the engine's counters with its result, so the driver's stats stay current.
This module imports neither Ray nor torch; cluster.py wraps the class as an actor.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import Any

from quail_engine.infer.api import PrefixHandle
from quail_engine.infer.factory import load_engine
from quail_engine.replicas.wire import (
    PackedAnswers,
    PackedRequests,
    pack_answers,
    unpack_requests,
)

log = logging.getLogger(__name__)
# test-only: the workers whose indices this lists (comma-separated) exit, as a crash would, on
# the next shard the driver sends them (once each)
CRASH_ENV = "QUAIL_RAY_TEST_CRASH_WORKER"


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """What the driver needs of the replica without calling it again."""

    model_id: str
    max_context: int
    config: Any
    pid: int
    node: str
    band: Any = None  # the replica's re-ask band (infer/reask.Band), None: it has none


class EngineWorker:
    """One replica. `index`: its place in the driver's list (names it in logs and the test
    hook); the rest are infer/factory.load_engine's arguments."""

    def __init__(self, index: int, spec: str, device: str, precision: str,
                 engine_kwargs: dict[str, Any]):
        self.index = index
        self.engine = load_engine(spec, device=device, precision=precision, **engine_kwargs)
        self.handles: dict[int, PrefixHandle] = {}  # the driver's prefix id -> this engine's

    def info(self) -> WorkerInfo:
        e = self.engine
        return WorkerInfo(e.model_id, e.max_context, getattr(e, "config", None), os.getpid(),
                          os.uname().nodename, getattr(e, "band", None))

    def run(self, requests: PackedRequests, new_prefixes: Sequence[tuple[int, tuple[int, ...]]]
            = (), released: Sequence[int] = (), crash: bool = False, reference: bool = False
            ) -> tuple[PackedAnswers, dict]:
        """Answers of a shard (both sides as wire.py columns), after encoding the prefixes the
        driver placed here for it (`new_prefixes`: (driver id, token ids)) and releasing those
        it no longer needs (`released`: driver ids). `reference`: answered at the re-ask band's
        reference precision (the replica's ReaskingEngine.ask_reference)."""
        if crash:  # the test hook (CRASH_ENV)
            log.error("worker %d exits on this shard (%s)", self.index, CRASH_ENV)
            os._exit(1)
        self._release(released)
        if new_prefixes:
            handles = self.engine.add_prefixes([t for _, t in new_prefixes])
            self.handles.update(zip((i for i, _ in new_prefixes), handles))
        ask = self.engine.ask_reference if reference else self.engine.run
        answers = ask(unpack_requests(requests, self.handles))
        return pack_answers(answers), self._stats()

    def decode_rows(self, prompt_tokens: int, max_tokens: int) -> int | None:
        """How many answers of that length this replica's engine decodes at once (its
        `decode_rows`; None where it has none), for the driver's sizing of generating
        batches."""
        fits = getattr(self.engine, "decode_rows", None)
        return fits(prompt_tokens, max_tokens) if fits is not None else None

    def release(self, released: Sequence[int]) -> dict:
        self._release(released)
        return self._stats()

    def _release(self, ids: Sequence[int]) -> None:
        for i in ids:
            handle = self.handles.pop(i, None)
            if handle is not None:
                self.engine.release(handle)

    def _stats(self) -> dict:
        """The engine's counters, and the answers its re-ask band sent to the reference."""
        return {**dataclasses.asdict(self.engine.stats),
                "reasked": getattr(self.engine, "reasked", 0)}
