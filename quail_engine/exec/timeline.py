"""The timeline of one execution, for `quail explain --analyze --plot`: phases and operator calls
as spans, each engine batch with its passes, tokens and the KV arena after it.

Times are seconds since the execution started (the report's creation). Recording appends one
small dict to a list (the engine's worker thread and the host thread both append; a list append
is atomic), so it stays off the hot path. Engine work is seen per `engine.run` call (a batch: one
or more forward passes, synchronised when the answers come back); the pass count, fresh and
requested tokens and GPU pass seconds are the engine's counters' change over it. The KV arena
is read after each batch and after each operator call that ran the engine (its private
documents released). On the GPU path a batch also lists its forward passes (`pass_log`:
tokens, sequences, prefix tokens, causal attention pairs, GPU seconds).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

MAX_EVENTS = 20_000  # a long-lived report (dbt view functions) keeps at most this many


@dataclass
class EngineMark:
    """The engine's counters when a batch starts."""

    time: float
    passes: int
    fresh_tokens: int
    requested_tokens: int
    gpu_pass_s: float


@dataclass
class Timeline:
    origin: float = field(default_factory=time.perf_counter)
    phases: list[dict] = field(default_factory=list)
    operators: list[dict] = field(default_factory=list)
    batches: list[dict] = field(default_factory=list)
    dropped: int = 0

    def seconds(self, t: float) -> float:
        return round(t - self.origin, 6)

    def phase(self, name: str, start: float, end: float) -> None:
        self._add(self.phases, {"name": name, "start": self.seconds(start),
                                "end": self.seconds(end)})

    def operator(self, op: int, kind: str, start: float, prompts: int, cache_hits: int,
                 engine=None) -> None:
        """One call answering `prompts` prompts of operator `op` from `start` to now,
        `cache_hits` of them from the answer cache; `engine`: the engine it ran (its KV arena
        is read), None when it ran none."""
        event = {"op": op, "kind": str(kind), "start": self.seconds(start),
                 "end": self.seconds(time.perf_counter()), "prompts": prompts,
                 "cache_hits": cache_hits}
        if engine is not None:
            event.update(kv_occupancy(engine))
        self._add(self.operators, event)

    def engine_mark(self, engine) -> EngineMark:
        s = engine.stats
        return EngineMark(time.perf_counter(), s.forward_passes, s.fresh_tokens,
                          s.requested_tokens, getattr(s, "gpu_pass_s", 0.0))

    def engine_batch(self, op: int, mark: EngineMark, engine) -> None:
        """The batch of operator `op` that started at `mark` has finished."""
        s = engine.stats
        event = {"op": op, "start": self.seconds(mark.time),
                 "end": self.seconds(time.perf_counter()),
                 "passes": s.forward_passes - mark.passes,
                 "fresh_tokens": s.fresh_tokens - mark.fresh_tokens,
                 "requested_tokens": s.requested_tokens - mark.requested_tokens,
                 "gpu_pass_s": round(getattr(s, "gpu_pass_s", 0.0) - mark.gpu_pass_s, 6)}
        event.update(kv_occupancy(engine))
        take = getattr(engine, "take_pass_log", None)
        if callable(take):  # the GPU engine: each pass's shape and GPU seconds
            event["pass_log"] = take()
        self._add(self.batches, event)

    def to_json(self) -> dict:
        return {"phases": list(self.phases), "operators": list(self.operators),
                "batches": list(self.batches), "dropped": self.dropped}

    def _add(self, events: list[dict], event: dict) -> None:
        if len(self.phases) + len(self.operators) + len(self.batches) >= MAX_EVENTS:
            self.dropped += 1
        else:
            events.append(event)


def kv_occupancy(engine) -> dict:
    """The KV arena's resident bytes and prefixes, and its capacity (the GPU's paged arena;
    None where unbounded or unknown, as on the CPU)."""
    arena = getattr(engine, "arena", None)
    capacity = getattr(arena, "capacity_bytes", None)
    paged = getattr(getattr(engine, "model", None), "arena", None)
    if capacity is None and hasattr(paged, "num_pages") and hasattr(paged, "page_bytes"):
        capacity = paged.num_pages * paged.page_bytes
    return {"kv_bytes": getattr(arena, "bytes_in_use", None), "kv_capacity_bytes": capacity,
            "kv_prefixes": getattr(getattr(engine, "stats", None), "prefixes_resident", None)}
