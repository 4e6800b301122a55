"""The body of one Ray actor: an engine replica (infer/factory.py) and its KV arena.

The driver (ray_engine.RayEngine) sends it prefixes to keep, requests to answer and the ids of
prefixes it no longer needs (piggybacked on the next call, so a release costs no round trip).
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


class EngineWorker:
    """One replica. `index`: its place in the driver's list (names it in logs and the test
    hook); the rest are infer/factory.load_engine's arguments."""

    def __init__(self, index: int, spec: str, device: str, precision: str,
                 engine_kwargs: dict[str, Any]):
        from quail_engine.infer.factory import load_engine

        self.index = index
        self.engine = load_engine(spec, device=device, precision=precision, **engine_kwargs)

    def info(self) -> WorkerInfo:
        e = self.engine
        return WorkerInfo(e.model_id, e.max_context, getattr(e, "config", None), os.getpid(),
                          os.uname().nodename)

    def add_prefixes(self, token_lists: Sequence[Sequence[int]],
                     released: Sequence[int] = ()) -> tuple[list[PrefixHandle], dict]:
        self._release(released)
        handles = self.engine.add_prefixes(token_lists) if token_lists else []
        return handles, self._stats()

    def run(self, requests: PackedRequests, released: Sequence[int] = (),
            crash: bool = False) -> tuple[PackedAnswers, dict]:
        """Answers of a shard (both sides as wire.py columns)."""
        if crash:  # the test hook (CRASH_ENV)
            log.error("worker %d exits on this shard (%s)", self.index, CRASH_ENV)
            os._exit(1)
        self._release(released)
        return pack_answers(self.engine.run(unpack_requests(requests))), self._stats()

    def release(self, released: Sequence[int]) -> dict:
        self._release(released)
        return self._stats()

    def _release(self, ids: Sequence[int]) -> None:
        for i in ids:
            self.engine.release(PrefixHandle(i, 0))

    def _stats(self) -> dict:
        return dataclasses.asdict(self.engine.stats)
