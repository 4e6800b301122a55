"""GpuRunner: the Runner interface (infer/runner.py: `run(jobs)` over SeqJob) on GpuCausalLM.

Differences from the CPU runner, all for throughput: the token budget is sized from free GPU
memory; jobs are ordered so that sequences sharing a resident prefix pack together (one
prefix-attention segment each); answer logits are copied to pinned host memory asynchronously
and a pass's answers are handed out while the next pass runs (the host waits on that pass's
event, never on the whole device); a call that reads nothing (anchor stores) does not wait.

Each pass's shape (tokens, sequences, prefix tokens read, causal attention pairs) and, on a GPU,
its time between CUDA events is kept until `take_pass_log()` (the report's timeline puts it
under the engine batch it ran in), so a run shows which passes take the GPU's time.
"""

from __future__ import annotations

import logging
import os
from array import array
from collections.abc import Sequence

import torch

from quail_engine.infer.api import EngineStats
from quail_engine.infer.gpu.staging import to_device
from quail_engine.infer.interrupt import StopFlag
from quail_engine.infer.runner import SeqJob, head_log_probs
from quail_engine.infer.scheduler import Scheduler, SeqWork

log = logging.getLogger(__name__)

MIN_BUDGET, MAX_BUDGET = 2048, 65536
PASS_LOG = 4096  # passes kept until taken (the oldest dropped beyond)


def activation_bytes_per_token(config) -> int:
    """Peak activation bytes one packed token needs inside a layer (bf16; both attention
    partials live at once, in float32, beside the merged row), with 25% headroom."""
    c = config
    q_dim = c.num_heads * c.head_dim
    qkv = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim
    elems = 4 * c.hidden_size + qkv + q_dim + 3 * c.intermediate_size
    return int(1.25 * (2 * elems + 8 * q_dim + 8 * c.num_heads))


def token_budget_for(config, device: torch.device, fraction: float = 0.5) -> int:
    """Fresh tokens per pass: `fraction` of the free GPU memory over the per-token activations,
    clamped to [2048, 65536] and rounded down to a multiple of 1024."""
    free, _ = torch.cuda.mem_get_info(device)
    tokens = int(free * fraction) // activation_bytes_per_token(config)
    return max(MIN_BUDGET, min(MAX_BUDGET, tokens // 1024 * 1024))


class GpuRunner:
    def __init__(self, model, stats: EngineStats, token_budget: int | None = None,
                 max_seqs: int | None = None):
        self.model = model
        self.stats = stats
        self.device = model.device
        if token_budget is None and self.device.type != "cuda":
            raise ValueError("token_budget is required off the GPU")
        budget = token_budget or token_budget_for(model.config, self.device)
        self.scheduler = Scheduler(budget, max_seqs or max(256, budget // 4))
        # passes in flight: their events and shapes (a shape gets `gpu_s` when its pass ends)
        self._timing: list[tuple[torch.cuda.Event, torch.cuda.Event, dict]] = []
        self._pass_log: list[dict] = []
        self.stop = StopFlag()  # checked before each pass (infer/interrupt.py)
        self.decode_graphs = self.device.type == "cuda"
        # plain greedy answers decode with the next step launched before the host reads the
        # last one's tokens (infer/decode_overlap.py); QUAIL_DECODE_OVERLAP=0: each step waits
        # for the host (the step-by-step loop, kept for comparison)
        self.decode_overlap = os.environ.get("QUAIL_DECODE_OVERLAP", "1") != "0"
        self._graphs = None
        self._retries0 = (torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0)
                          if self.device.type == "cuda" else 0)
        log.info("GPU runner: %d tokens per pass", budget)

    def run(self, jobs: Sequence[SeqJob], count_as_decode: bool = False) -> None:
        """Runs every job; a pass's answers are read back while the next pass runs on the
        GPU, and a call whose jobs read nothing (anchor stores) returns without waiting."""
        order = sorted(range(len(jobs)), key=lambda i: id(jobs[i].prefix) if jobs[i].prefix
                       is not None else 0)
        work = [SeqWork(len(jobs[i].tokens), jobs[i].num_prefix_tokens) for i in order]
        previous = None
        for batch in self.scheduler.pack(work):
            self.stop.check()
            launched = self._run_pass([jobs[order[i]] for i in batch], count_as_decode)
            if previous is not None:
                _read_back(*previous)
                self._count_busy()
            previous = launched
        if previous is not None:
            _read_back(*previous)
        self._count_busy()
        if self.device.type == "cuda":  # (a dict of the allocator's counters: once a call)
            retries = torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0)
            self.stats.alloc_retries = retries - self._retries0

    @torch.inference_mode()
    def decode_step(self, jobs: Sequence[SeqJob]) -> None:
        """One decode step: each job is one token over its sequence's own KV (`prefix`, held by
        that sequence alone), which grows by the token in place and becomes the job's `kv`;
        its logits over the whole vocabulary stay on the device. (`run` would store each
        token's KV in a fresh extension of the prefix: a page per sequence per step and a copy
        of the prefix's last partial page.) On a CUDA device the step replays a CUDA graph
        (decode_graph.py); more sequences than its largest graph holds run in parts."""
        parts = self._decode_parts([j.tokens[0] for j in jobs], [j.prefix for j in jobs],
                                   keep=True)
        for lo, logits in parts:
            for k, job in enumerate(jobs[lo:lo + len(logits)]):
                job.kv = job.prefix
                job.logits = logits[k:k + 1]

    @torch.inference_mode()
    def decode_stage(self, prefixes: Sequence):
        """The host's part of the next `decode_next` over `prefixes` (their growth, the
        step's positions, slots and block table copied behind the step in flight), done while
        the host would otherwise wait (decode_overlap.py: during a grammar's masks); None
        where the step is not one graph's (graphs off, or more rows than the largest)."""
        graphs = self._decode_graphs()
        if graphs is None or not prefixes or len(prefixes) > self._part_rows(graphs, 0):
            return None
        return graphs.stage(prefixes)

    @torch.inference_mode()
    def decode_next(self, prefixes: Sequence, ids: torch.Tensor,
                    keep: Sequence[int] = (), staged=None
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One greedy decode step that never waits for the GPU: token b (`ids`, on the
        device) continues `prefixes[b]`, which grows by it in place as in `decode_step`.
        Returns each row's most likely next token, on the device, and the whole logits of
        the rows in `keep` ([len(keep), V]: rows whose choice a grammar makes later). The host
        can prepare the next step (and read this step's tokens later) while this one runs
        (decode_overlap.py). `staged`: `decode_stage(prefixes)` done already.

        The kept logits are a copy where the step runs in parts (a later part may replay the
        same graph over the output) or keeps only some rows; a staged step is one part, and
        keeping all its rows returns the step's output itself (a view the next step's launch
        overwrites: whatever reads it must be queued before that launch, as the overlapped
        loop's masked choice is), since copying the batch's full-vocabulary float32 logits
        twice (the gather, then the concatenation) costs a constrained step GPU time that the
        free step does not spend."""
        if staged is not None and staged.prefixes != tuple(map(id, prefixes)):
            raise ValueError("decode_next over other prefixes than were staged")
        tokens, kept = [], []
        for lo, logits in self._decode_parts(ids, prefixes, keep=False, staged=staged):
            tokens.append(logits.argmax(dim=-1))
            rows = [k - lo for k in keep if lo <= k < lo + len(logits)]
            if staged is not None and rows == list(range(len(logits))):
                kept.append(logits)  # (the one part of a staged step, every row kept)
            elif rows:  # (before a later part replays the same graph over this output)
                kept.append(logits[to_device(rows, self.device)])
        return (tokens[0] if len(tokens) == 1 else torch.cat(tokens),
                None if not kept else kept[0] if len(kept) == 1 else torch.cat(kept))

    def _decode_parts(self, ids, prefixes: Sequence, keep: bool, staged=None):
        """Yield (first row, logits) per part of one decode step (at most the largest decode
        graph's rows a part; `staged`: the one part `decode_stage` staged). A graph's logits
        are a view of its output buffer, which a later part replaying the same graph
        overwrites: `keep` clones them, else the caller must read each part before taking the
        next."""
        graphs = self._decode_graphs()
        n = len(prefixes)
        size = self._part_rows(graphs, n)
        for lo in range(0, n, size):
            part_ids, part = ids[lo:lo + size], prefixes[lo:lo + size]
            self.stop.check()
            timing = None
            if self.device.type == "cuda":
                timing = (torch.cuda.Event(enable_timing=True),
                          torch.cuda.Event(enable_timing=True),
                          {"tokens": len(part), "seqs": len(part)})
                timing[0].record()
            if staged is not None:
                logits = graphs.launch(part_ids, staged)
            elif graphs is not None:
                logits = graphs.run(part_ids, part)
                if keep and lo + size < n:  # a later part may replay the same graph
                    logits = logits.clone()
            else:
                logits = self.model.vocab_logits(self.model.decode(part_ids, part))
            self._end_timing(timing)
            self.stats.forward_passes += 1
            self.stats.decode_tokens += len(part)
            yield lo, logits
        self._count_busy()

    def _part_rows(self, graphs, n: int) -> int:
        """Rows of one part of a decode step of `n` rows: at most the token budget and, with
        the decode graphs, their largest bucket."""
        return max(1, min(self.scheduler.token_budget, graphs.largest if graphs else n))

    def _decode_graphs(self):
        """The model's decode graphs (decode_graph.py) when `decode_graphs` is on (by default
        on a CUDA device), else None (eager steps)."""
        if not self.decode_graphs:
            return None
        if self._graphs is None:
            from quail_engine.infer.gpu.decode_graph import DecodeGraphs  # (deferred: triton)

            self._graphs = DecodeGraphs(self.model)
        return self._graphs

    def _count_busy(self) -> None:
        """Add the GPU time of every timed pass that has completed (one stream: passes run one
        after another, so the query's time outside their sum is time the GPU waited)."""
        pending = []
        for a, b, shape in self._timing:
            if b.query():
                seconds = a.elapsed_time(b) / 1000.0
                self.stats.gpu_pass_s += seconds
                shape["gpu_s"] = round(seconds, 6)
            else:
                pending.append((a, b, shape))
        self._timing = pending

    def take_pass_log(self) -> list[dict]:
        """The prefill passes run since the last call (on a GPU, those whose time is known):
        tokens, seqs, prefix_tokens, attention_pairs (each token's keys: its prefix and its
        causal own part) and gpu_s. A pass that failed never gets its time and is dropped."""
        done, waiting = [], []
        in_flight = {id(t[2]) for t in self._timing}
        for shape in self._pass_log:
            if "gpu_s" in shape or self.device.type != "cuda":
                done.append(shape)
            elif id(shape) in in_flight:
                waiting.append(shape)
        self._pass_log = waiting
        return done[-PASS_LOG:]

    @torch.inference_mode()
    def _run_pass(self, jobs: list[SeqJob], count_as_decode: bool):
        ids, positions, cu, reads, spans, prefix_tokens, pairs = host_inputs(jobs)
        dev = self.device
        timing = None
        shape = {"tokens": len(ids), "seqs": len(jobs), "prefix_tokens": prefix_tokens,
                 "attention_pairs": pairs}
        if not count_as_decode:  # prefill passes (decode steps are many and tiny)
            self._pass_log.append(shape)
            if len(self._pass_log) > 2 * PASS_LOG:  # nobody takes them (the engine alone)
                del self._pass_log[:-PASS_LOG]
        if dev.type == "cuda":
            timing = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True),
                      shape)
            timing[0].record()
        # host tensors: the model stages them to the GPU without waiting for queued passes
        hidden, kvs = self.model.forward(ids, positions, cu, [j.prefix for j in jobs], reads,
                                         [j.store_kv for j in jobs])
        self.stats.forward_passes += 1
        if count_as_decode:
            self.stats.decode_tokens += len(ids)
        else:
            self.stats.fresh_tokens += len(ids)
        for job, kv in zip(jobs, kvs):  # (each the whole sequence's, prefix included)
            if job.store_kv:
                job.kv = kv
        vocabs = [j.vocab for j in jobs if j.read]
        if not vocabs:
            self._end_timing(timing)
            return jobs, spans, None, None, None
        columns: dict[int, int] | None = None
        token_ids = None
        shared = False
        normed = [j.log_probs for j in jobs if j.read]
        if all(normed):  # only the asked columns cross to the host, already normalized
            union = sorted({t for j in jobs if j.read for t in (j.vocab or ())})
            logits = head_log_probs(self.model, hidden, union)
            return self._to_host(logits, {t: c for c, t in enumerate(union)}, jobs, spans,
                                 timing)
        if any(normed):
            raise ValueError("a pass mixes log-probability reads with logit reads")
        if all(v is not None for v in vocabs):
            first = tuple(vocabs[0])
            if len(set(first)) == len(first) and all(tuple(v) == first for v in vocabs):
                shared = True  # one vocabulary for the whole pass: rows come back as they are
                token_ids = to_device(list(first), dev)
            else:
                union = sorted({t for v in vocabs for t in v})
                columns = {t: c for c, t in enumerate(union)}
                token_ids = to_device(union, dev)
        logits = self.model.logits(hidden, token_ids)
        if all(j.on_device for j in jobs if j.read):  # read where they are (decode steps)
            self._end_timing(timing)
            return jobs, spans, logits, True if shared else columns, None
        return self._to_host(logits, True if shared else columns, jobs, spans, timing)

    def _to_host(self, logits: torch.Tensor, columns, jobs, spans, timing):
        dev = self.device
        host = torch.empty(logits.shape, dtype=torch.float32, pin_memory=dev.type == "cuda")
        host.copy_(logits, non_blocking=True)
        done = None
        if dev.type == "cuda":
            done = torch.cuda.Event()
            done.record()
        self._end_timing(timing)
        return jobs, spans, host, columns, done

    def _end_timing(self, timing) -> None:
        if timing is not None:
            timing[1].record()
            self._timing.append(timing)


def host_inputs(jobs: Sequence[SeqJob]):
    """A pass's inputs as host tensors -> (token ids [T], positions [T], cu_seqlens [B+1] int32,
    read rows, each job's (first read, reads), prefix tokens, attention pairs). The ids go
    through an array and the positions are computed per sequence in torch: building both as
    Python lists and converting them took most of the engine thread's host time on passes of
    tens of thousands of tokens (torch.tensor over a list costs per element)."""
    ids = array("q")
    lens, starts, reads, spans = [], [], [], []
    prefix_tokens = pairs = total = 0
    for job in jobs:
        n, start = len(job.tokens), job.num_prefix_tokens
        prefix_tokens += start
        pairs += n * start + n * (n + 1) // 2
        ids.extend(job.tokens)
        lens.append(n)
        starts.append(start)
        spans.append((len(reads), len(job.read)))
        for r in job.read:
            off = r if r >= 0 else n + r
            if not 0 <= off < n:
                raise ValueError(f"read offset {r} outside a sequence of {n} tokens")
            reads.append(total + off)
        total += n
    long = torch.long
    lengths = torch.tensor(lens, dtype=long)
    cu = torch.zeros(len(lens) + 1, dtype=long)
    torch.cumsum(lengths, 0, out=cu[1:])
    # (frombuffer shares the array's memory: the tensor keeps the array alive)
    ids_t = torch.frombuffer(ids, dtype=long) if total else torch.zeros(0, dtype=long)
    positions = torch.arange(total, dtype=long) + torch.repeat_interleave(
        torch.tensor(starts, dtype=long) - cu[:-1], lengths, output_size=total)
    return (ids_t, positions, cu.to(torch.int32), torch.tensor(reads, dtype=long), spans,
            prefix_tokens, pairs)


def _read_back(jobs: list[SeqJob], spans, host, columns, done) -> None:
    """Hands each job its rows of a finished pass (`host`: the logits on the host, or on the
    device for jobs that read them there). `columns`: True when the pass computed exactly
    every job's vocabulary in order; else a token -> column map (None: full vocab)."""
    if host is None:
        return
    if done is not None:
        done.synchronize()
    union = tuple(columns) if isinstance(columns, dict) else None  # the columns' tokens
    for job, (first, count) in zip(jobs, spans):
        if count:
            part = host[first:first + count]
            if job.vocab is not None and columns is not True and not (
                    union is not None and len(job.vocab) == len(union)
                    and tuple(job.vocab) == union):  # asked for every column, in order
                cols = list(job.vocab) if columns is None else [columns[t] for t in job.vocab]
                part = part[:, cols]
            job.logits = part
