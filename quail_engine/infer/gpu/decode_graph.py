"""Decode steps replayed from CUDA graphs.

A decode step is a few hundred small kernel launches (per layer: norms, GEMMs, RoPE, the KV
store, attention, the merge) over one token per sequence; launched from Python they take
longer than the GPU takes to run them, so the GPU waits on the host. A graph per batch size
(`BUCKETS`: a step of n sequences runs the smallest bucket >= n) records the launches once and
replays them in one call.

A graph reads its inputs from fixed buffers: token ids, positions, the sequences' new KV
slots, their block-table rows and lengths. Rows past the step's own sequences are padding:
their token goes to a scratch page the graphs own and attends over itself there, so a padded
row reads and writes nothing a sequence holds, and every real row's output equals an eager
step's (each row's attention reads only its own block-table row; the other per-row kernels
are independent per row).

`StaticDecode` is the same step over the same buffers without a graph (capture=False), so the
padding can be checked where CUDA graphs do not exist (the CPU tests).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from quail_engine.infer.gpu.attention import PrefixPlan
from quail_engine.infer.gpu.batch import PackedBatch, grow_rows
from quail_engine.infer.gpu.paged_kv import PagedPrefix
from quail_engine.infer.gpu.staging import to_device

log = logging.getLogger(__name__)

BUCKETS = (8, 16, 32, 64, 128, 256, 384, 512, 768, 1024)


def buckets_from_env(default: Sequence[int] = BUCKETS) -> tuple[int, ...]:
    """QUAIL_DECODE_BUCKETS ("8,16,...,1024", increasing), else `default`: a finer set pads
    fewer rows per step (a padded row costs its GEMM share) and captures more graphs."""
    raw = os.environ.get("QUAIL_DECODE_BUCKETS", "").strip()
    if not raw:
        return tuple(default)
    try:
        sizes = tuple(int(x) for x in raw.split(","))
    except ValueError:
        raise ValueError(f"QUAIL_DECODE_BUCKETS must be increasing whole numbers separated "
                         f"by commas, got {raw!r}") from None
    if not sizes or sizes[0] < 1 or any(a >= b for a, b in zip(sizes, sizes[1:])):
        raise ValueError(f"QUAIL_DECODE_BUCKETS must be increasing whole numbers separated "
                         f"by commas, got {raw!r}")
    return sizes


def bucket_for(n: int, buckets: Sequence[int] = BUCKETS) -> int | None:
    """The smallest bucket holding n rows, or None past the largest."""
    return next((b for b in buckets if b >= n), None)


class StaticDecode:
    """One batch size's decode step over fixed input buffers; a CUDA graph of it when
    `capture` (then `run` replays the graph)."""

    def __init__(self, model, rows: int, scratch_page: int, capture: bool, pool=None):
        self.model = model
        self.rows = rows
        dev = model.device
        arena = model.arena
        self.page = arena.page_size
        self.scratch = scratch_page
        width = -(-model.config.max_position // self.page)
        self.ids = torch.zeros(rows, dtype=torch.long, device=dev)
        self.positions = torch.zeros(rows, dtype=torch.long, device=dev)
        self.slots = torch.full((rows,), scratch_page * self.page, dtype=torch.long, device=dev)
        self.table = torch.full((rows, width), scratch_page, dtype=torch.int32, device=dev)
        self.lens = torch.ones(rows, dtype=torch.int32, device=dev)
        cu = torch.arange(rows + 1, dtype=torch.int32, device=dev)
        index = torch.arange(rows, device=dev)
        # max_len 0: the attention's long-prefix tiles, whatever the step's longest prefix
        plan = PrefixPlan(self.table, self.lens, runs=[(0, rows, None)], max_len=0)
        self.batch = PackedBatch(
            input_ids=self.ids, positions=self.positions, cu_seqlens=cu, max_seqlen=1,
            read_index=index, has_prefix=True, seg_cu=cu, prefix_plan=plan, max_seg_len=1,
            store_rows=index, store_slots=self.slots, stored=[], decode=True)
        self.graph = None
        self.logits = self._forward()  # (a first run compiles and selects the kernels)
        if capture:
            torch.cuda.synchronize(dev)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, pool=pool):
                self.logits = self._forward()

    def _forward(self) -> torch.Tensor:
        return self.model.vocab_logits(self.model._layers(self.batch))

    def run(self, ids: Sequence[int] | torch.Tensor,
            prefixes: Sequence[PagedPrefix]) -> torch.Tensor:
        """One step for len(ids) <= rows sequences -> their logits [n, V] (a view of the
        step's output buffer: read before the next step). `ids` on the host or the device
        (then copied there without the host waiting)."""
        return self.launch(ids, self.stage(prefixes))

    def stage(self, prefixes: Sequence[PagedPrefix]) -> int:
        """The step's inputs but its token ids: each prefix grows by the slot its next token's
        KV goes to, and the positions, slots, lengths and block-table rows are copied to the
        fixed buffers behind whatever the stream runs now (a step in flight reads them before
        the copies land). Returns the number of rows staged, for `launch`."""
        n = len(prefixes)
        slots, lens, rows = grow_rows(prefixes, self.model.arena, self.scratch)
        width = len(rows[0])
        pad = self.rows - n
        dev = self.model.device
        self.positions.copy_(to_device([m - 1 for m in lens] + [0] * pad, dev),
                             non_blocking=True)
        self.slots.copy_(to_device(slots + [self.scratch * self.page] * pad, dev),
                         non_blocking=True)
        self.lens.copy_(to_device(lens + [1] * pad, dev, torch.int32), non_blocking=True)
        rows += [[self.scratch] * width] * pad
        self.table[:, :width].copy_(to_device(torch.tensor(rows, dtype=torch.int32), dev),
                                    non_blocking=True)
        return n

    def launch(self, ids: Sequence[int] | torch.Tensor, n: int) -> torch.Tensor:
        """Run the step staged for `n` rows on token `ids` -> their logits [n, V]."""
        if len(ids) != n:
            raise ValueError(f"{len(ids)} token ids for a step staged for {n} sequences")
        dev = self.model.device
        if isinstance(ids, torch.Tensor):
            self.ids[:n].copy_(ids, non_blocking=True)
            self.ids[n:].zero_()
        else:
            self.ids.copy_(to_device(list(ids) + [0] * (self.rows - n), dev), non_blocking=True)
        if self.graph is not None:
            self.graph.replay()
        else:
            self.logits = self._forward()
        return self.logits[:n]


class DecodeGraphs:
    """The decode steps of one model: a StaticDecode per bucket, made on first use (captured
    as a CUDA graph on a CUDA device), all sharing one memory pool and one scratch page."""

    def __init__(self, model, capture: bool | None = None,
                 buckets: Sequence[int] | None = None):
        self.model = model
        self.capture = model.device.type == "cuda" if capture is None else capture
        self.buckets = tuple(buckets) if buckets is not None else buckets_from_env()
        self.steps: dict[int, StaticDecode] = {}
        self.scratch: int | None = None
        self.pool = torch.cuda.graph_pool_handle() if self.capture else None

    @property
    def largest(self) -> int:
        return self.buckets[-1]

    def run(self, ids: Sequence[int] | torch.Tensor,
            prefixes: Sequence[PagedPrefix]) -> torch.Tensor:
        return self.launch(ids, self.stage(prefixes))

    def stage(self, prefixes: Sequence[PagedPrefix]) -> Staged:
        """A step of `prefixes` with its inputs in place but its token ids (StaticDecode.stage),
        for `launch`: the host's part of a step, done before the ids exist."""
        longest = max(p.num_tokens for p in prefixes)
        if longest >= self.model.config.max_position:
            raise ValueError(f"position {longest} beyond max_position "
                             f"{self.model.config.max_position}")
        rows = bucket_for(len(prefixes), self.buckets)
        if rows is None:
            raise ValueError(f"{len(prefixes)} sequences in one graph step; at most "
                             f"{self.largest}")
        if self.scratch is None:
            self.scratch = self.model.arena.take_page()  # held for the model's life
        step = self.steps.get(rows)
        if step is None:
            step = StaticDecode(self.model, rows, self.scratch, self.capture, self.pool)
            self.steps[rows] = step
            log.info("decode step of %d rows %s", rows,
                     "captured as a CUDA graph" if self.capture else "on static buffers")
        return Staged(step, step.stage(prefixes), tuple(map(id, prefixes)))

    def launch(self, ids: Sequence[int] | torch.Tensor, staged: Staged) -> torch.Tensor:
        """Run a staged step on its token `ids` -> logits [n, V] (a view, as `run`'s)."""
        return staged.step.launch(ids, staged.n)


@dataclass(frozen=True)
class Staged:
    """A decode step whose inputs are in its graph's buffers, waiting for its token ids;
    `prefixes`: the identities of the prefixes it grew, in row order."""
    step: StaticDecode
    n: int
    prefixes: tuple[int, ...]
