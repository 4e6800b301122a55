"""RayEngine: the engine request API (infer/api.py) over engine replicas on Ray actors.

The executor drives it exactly as it drives one local engine. `add_prefixes` only records the
prefixes' token ids; the first batch that reads a prefix places it (sharding.place: the prefixes
with the most work in that batch first, each on the worker with the least work so far) and the
chosen worker encodes it in the same call that answers the batch's requests over it. From then
on every request that names the prefix goes to that worker: a join's anchor KV never moves, and
each batch's anchors are spread by the partner requests that read them. Requests without a
prefix (a filter's, a classification's rows) are cut into contiguous row ranges that bring every
worker to the same number of tokens (sharding.route). Releases ride along with the worker's next
call. Prefix ids are the driver's on both sides.

Faults: a worker that dies mid-call is dropped and its shard re-runs on the live workers in the
same batch; the prefixes it held are placed and encoded again from their token ids (kept by the
driver for this reason). Answers already returned (and cached by the executor) are not
recomputed. The answer cache stays the driver's alone: workers return answers, never write.

Under a banded precision each replica is a ReaskingEngine (infer/reask.py) that re-asks its own
close calls; the driver shows the executor the same surface one such engine does: the `band`,
`ask_reference` for a value made of several answers that only the executor can judge close (a
similarity's two directions), routed like any batch, and `reasked`, the workers' count.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from quail_engine.errors import ExecutionError, QuailError
from quail_engine.infer.api import Answer, EngineStats, PrefixHandle, Request
from quail_engine.infer.model_ref import ModelRef
from quail_engine.replicas import cluster, sharding
from quail_engine.replicas.cluster import ClusterError
from quail_engine.replicas.wire import pack_requests, unpack_answers
from quail_engine.replicas.worker import CRASH_ENV, WorkerInfo
from quail_engine.settings import Device

log = logging.getLogger(__name__)
stage = logging.getLogger("quail_engine.stage")


@dataclasses.dataclass
class _Prefix:
    tokens: tuple[int, ...]
    worker: int | None = None  # None until a batch reads it (or after its worker died)
    refs: int = 1


class RayEngine:
    """`actors`: started EngineWorker actors (cluster.start_workers); `ray`: the ray module."""

    def __init__(self, ray: Any, actors: list, spec: str = "default"):
        self._ray, self.spec, self._codec = ray, spec, None
        self._actors = dict(enumerate(actors))
        self._dead_errors = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                             ray.exceptions.ObjectLostError)
        try:
            infos: list[WorkerInfo] = self._get([a.info.remote() for a in actors])
        except self._dead_errors as exc:  # a process that died loading the model (memory...)
            raise ClusterError(f"a Ray worker died while loading the model: "
                               f"{' '.join(str(exc).split())[:200]}") from None
        first = infos[0]
        self.model_id, self.max_context, self.config = first.model_id, first.max_context, \
            first.config
        self.band = first.band  # every replica loads the same model and precision
        self.nodes = sorted({i.node for i in infos})
        self.stats = EngineStats()
        self._worker_stats: dict[int, dict] = {}
        self._prefixes: dict[int, _Prefix] = {}
        self._next_id = 0
        self._released: dict[int, list[int]] = {w: [] for w in self._actors}
        self.failures = 0  # shards re-run after a worker died
        self._crashed: set[int] = set()

    @classmethod
    def start(cls, spec: str, device: str | Device, precision: str = "bf16",
              workers: int | None = None,
              address: str | None = None, engine_kwargs: dict[str, Any] | None = None
              ) -> RayEngine:
        """Replicas of `spec` on `workers` Ray workers (default: one per GPU of the cluster, or
        one per node on the CPU). `device`: auto (cuda when the cluster has GPUs), cpu, cuda."""
        ray = cluster.connect(address)
        on_gpu = (ray.cluster_resources().get("GPU", 0) > 0 if device == "auto"
                  else Device.resolve(device).is_cuda)
        n = workers or cluster.default_workers(ray, on_gpu)
        stage.info("loading %s on %d Ray workers (%s)", spec, n, "cuda" if on_gpu else "cpu")
        actors = cluster.start_workers(ray, n, spec, Device("cuda:0" if on_gpu else "cpu"),
                                       precision, engine_kwargs or {})
        try:
            return cls(ray, actors, spec)
        except BaseException:
            for a in actors:
                ray.kill(a)
            raise

    @property
    def num_workers(self) -> int:
        return len(self._actors)

    # -- text: the driver's own tokenizer (the executor tokenizes; workers get token ids) -----
    @property
    def codec(self) -> Any:
        """The model's TextCodec on this host (tokenizer only, no weights)."""
        if self._codec is None:
            self._codec = ModelRef.resolve(self.spec).codec()
        return self._codec

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return self.codec.encode_batch(texts)

    def chat_split(self, prefix_text: str, suffix_text: str) -> tuple[list[int], list[int]]:
        return self.codec.chat_split(prefix_text, suffix_text)

    @property
    def reasked(self) -> int:
        """Answers the replicas' re-ask band sent to the reference precision (dead workers'
        included), as a single ReaskingEngine counts them."""
        return sum(s.get("reasked", 0) for s in self._worker_stats.values())

    @property
    def worker_tokens(self) -> dict[int, int]:
        """Fresh tokens each worker has run (dead ones included): how the work was shared."""
        return {w: s.get("fresh_tokens", 0) for w, s in sorted(self._worker_stats.items())}

    # -- prefixes: placed and encoded by the first batch that reads them ---------------------
    def add_prefix(self, tokens: Sequence[int]) -> PrefixHandle:
        return self.add_prefixes([tokens])[0]

    def add_prefixes(self, token_lists: Sequence[Sequence[int]]) -> list[PrefixHandle]:
        handles = []
        for tokens in token_lists:
            if not tokens:
                raise ExecutionError("a prefix needs at least one token")
            self._next_id += 1
            self._prefixes[self._next_id] = _Prefix(tuple(tokens))
            handles.append(PrefixHandle(self._next_id, len(tokens)))
        self.stats.prefixes_resident = len(self._prefixes)
        return handles

    def retain(self, handle: PrefixHandle) -> None:
        self._prefixes[handle.id].refs += 1

    def release(self, handle: PrefixHandle) -> None:
        p = self._prefixes.get(handle.id)
        if p is None:
            return
        p.refs -= 1
        if p.refs <= 0:
            del self._prefixes[handle.id]
            if p.worker in self._actors:
                self._released[p.worker].append(handle.id)
            self.stats.prefixes_resident = len(self._prefixes)

    # -- requests -----------------------------------------------------------------------------
    def run(self, requests: Sequence[Request]) -> list[Answer]:
        return self._answer(requests, reference=False)

    def ask_reference(self, requests: Sequence[Request]) -> list[Answer]:
        """`requests` answered at the reference precision by the replicas' re-ask band
        (ReaskingEngine.ask_reference), sharded as `run` shards; counted in `reasked`."""
        if self.band is None:
            raise ExecutionError("the Ray workers' engines have no re-ask band: no reference "
                                 "precision to ask")
        return self._answer(requests, reference=True)

    def decode_rows(self, prompt_tokens: int, max_tokens: int) -> int | None:
        """Answers of `prompt_tokens` + `max_tokens` tokens the replicas decode at once: the sum
        of the live workers' (a batch of generating rows is cut into equal shares of tokens,
        one a worker, and each decodes its share at the batch its own engine holds); None where
        a worker's engine does not say, or a worker died while asked (the next call that sends
        it work finds it gone and drops it)."""
        try:
            rows = self._get([a.decode_rows.remote(prompt_tokens, max_tokens)
                              for a in self._actors.values()])
        except self._dead_errors:
            return None
        if not rows or any(r is None for r in rows):
            return None
        return sum(rows)

    def _answer(self, requests: Sequence[Request], reference: bool) -> list[Answer]:
        if not requests:
            return []
        costs = [len(r.tokens) for r in requests]
        new = self._place(requests, costs)
        owners = [self._prefixes[r.prefix.id].worker if r.prefix else None for r in requests]
        shards = sharding.route(costs, owners, sorted(self._actors))
        crash = self._crash_hook()
        out, failed = self._call(shards, lambda a, w, idx: a.run.remote(
            pack_requests([requests[i] for i in idx]), new.get(w, []),
            self._take_released(w), w in crash, reference), unpack_answers)
        answers = [None if r is None else r[1] for r in out]
        if failed:  # the dead worker's prefixes are placed and encoded again by the nested call
            for i, a in zip(failed, self._answer([requests[i] for i in failed], reference)):
                answers[i] = a
        self._sync_stats()
        return answers

    def _place(self, requests: Sequence[Request], costs: list[int]
               ) -> dict[int, list[tuple[int, tuple[int, ...]]]]:
        """Place the prefixes this batch reads that no live worker holds; returns, per worker,
        the (id, token ids) it must encode before answering."""
        load = dict.fromkeys(self._actors, 0.0)
        work: dict[int, float] = {}
        for r, cost in zip(requests, costs):
            if r.prefix is None:
                continue
            p = self._prefixes[r.prefix.id]
            if p.worker in load:
                load[p.worker] += cost
            else:
                work[r.prefix.id] = work.get(r.prefix.id, len(p.tokens)) + cost
        new: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
        for pid, w in sharding.place(work, load).items():
            p = self._prefixes[pid]
            p.worker = w
            new.setdefault(w, []).append((pid, p.tokens))
        return new

    def ping(self) -> float:
        """Seconds of one no-op call to every live worker at once (the backend's round trip)."""
        start = time.perf_counter()
        self._get([a.release.remote(()) for a in self._actors.values()])
        return time.perf_counter() - start

    def close(self) -> None:
        """Stop the workers (their replicas and KV go with them)."""
        for actor in self._actors.values():
            self._ray.kill(actor)
        self._actors.clear()

    # -- internals ----------------------------------------------------------------------------
    def _call(self, shards: dict[int, list[int]], submit: Callable,
              decode: Callable[[Any], list] = list) -> tuple[list, list[int]]:
        """Run each shard on its worker at once. Returns, per item index, (worker, result), and
        the indices of the shards whose worker died (dropped from the pool; the caller routes
        them again over the live workers)."""
        out: list = [None] * (max((i for idx in shards.values() for i in idx), default=-1) + 1)
        refs = [(w, idx, submit(self._actors[w], w, idx)) for w, idx in shards.items()]
        failed: list[int] = []
        for w, idx, ref in refs:
            try:
                result, stats = self._get(ref)
            except self._dead_errors as exc:
                self._drop(w, exc)
                failed += idx
                continue
            self._worker_stats[w] = stats
            for i, r in zip(idx, decode(result), strict=True):
                out[i] = (w, r)
        if failed:
            self.failures += 1
            log.warning("re-running %d items of a dead worker's shard on the %d live workers",
                        len(failed), len(self._actors))
        return out, failed

    def _get(self, refs):
        """ray.get, with an engine error raised on a worker re-raised as itself (one line)."""
        try:
            return self._ray.get(refs)
        except self._ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, QuailError):
                raise cause from None
            raise ClusterError(f"a Ray worker failed: {type(cause).__name__}: "
                               f"{' '.join(str(cause).split())[:200]}") from None

    def _drop(self, w: int, exc: BaseException) -> None:
        self._actors.pop(w, None)
        self._released.pop(w, None)
        for p in self._prefixes.values():
            if p.worker == w:
                p.worker = None  # placed and encoded again by the next batch that reads it
        log.warning("Ray worker %d died (%s); %d left", w, type(exc).__name__, len(self._actors))
        if not self._actors:
            raise ClusterError("every Ray worker died; see the Ray logs (/tmp/ray/session_latest"
                               "/logs) for why") from None

    def _take_released(self, w: int) -> list[int]:
        ids, self._released[w] = self._released.get(w, []), []
        return ids

    def _crash_hook(self) -> set[int]:
        """Workers the test hook (worker.CRASH_ENV) makes exit on this call, once each."""
        listed = {int(w) for w in os.environ.get(CRASH_ENV, "").split(",") if w.strip()}
        crash = (listed & set(self._actors)) - self._crashed
        self._crashed |= crash
        return crash

    def _sync_stats(self) -> None:
        for f in ("requested_tokens", "fresh_tokens", "forward_passes", "gpu_pass_s",
                  "decode_tokens", "vain_decode_tokens", "forced_tokens", "alloc_retries",
                  "kv_hit_tokens", "preemptions"):
            setattr(self.stats, f, sum(s.get(f, 0) for s in self._worker_stats.values()))
        self.stats.prefixes_resident = len(self._prefixes)

