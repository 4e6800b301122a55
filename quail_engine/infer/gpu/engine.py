"""GpuEngine: LocalEngine (the Engine protocol) with the model on GpuCausalLM, the runner on
GpuRunner and prefixes in the paged arena, so callers use one API whatever the device."""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any

import torch

from quail_engine.errors import QuailError
from quail_engine.infer.api import PrefixHandle
from quail_engine.infer.engine import LocalEngine
from quail_engine.infer.gpu import attention, compile_log
from quail_engine.infer.gpu.load import load_checkpoint
from quail_engine.infer.gpu.model import GpuCausalLM
from quail_engine.infer.gpu.paged_kv import PagedKVArena, PagedPageStore
from quail_engine.infer.gpu.runner import GpuRunner
from quail_engine.infer.prefix_cache import PrefixCache
from quail_engine.infer.runner import SeqJob

log = logging.getLogger(__name__)
# one sequence length per attention tile shape the kernels pick (<= 32, 33-1023, >= 1024 tokens);
# the longest with each shorter one too (a pass split into launches by length)
WARM_UP_LENGTHS = (16, 288, 1024)


KV_DTYPES = ("bf16", "fp8")  # QUAIL_KV_DTYPE's values (unset: bf16, the model's dtype)


def kv_fp8_requested() -> bool:
    """Whether QUAIL_KV_DTYPE asks for the fp8 KV arena (off unless set to fp8). An
    environment setting, as QUAIL_DECODE_OVERLAP is: the arena is the engine's layout, not a
    precision of the answers' own (it shows in the model id instead: precision_model_id)."""
    value = os.environ.get("QUAIL_KV_DTYPE", "").strip().lower() or "bf16"
    if value not in KV_DTYPES:
        raise QuailError(f"QUAIL_KV_DTYPE must be one of {', '.join(KV_DTYPES)}; got {value!r}")
    return value == "fp8"


KV_FRACTION = 0.4  # of the GPU memory free after loading; QUAIL_KV_FRACTION overrides


def kv_fraction_requested() -> float:
    """The share of the GPU memory free after the weights load that the KV arena takes:
    QUAIL_KV_FRACTION, else KV_FRACTION. An environment setting for the machine, as
    QUAIL_KV_DTYPE is: lower where another process shares the GPU; higher gives the decode
    loop more sequences at once, and what is left must still hold a pass's activations
    (gpu/runner.token_budget_for sizes passes from it). It sets how many rows decode
    together, as batch sizes do (which in bf16 or fp8 can round a near tie either way)."""
    raw = os.environ.get("QUAIL_KV_FRACTION", "").strip()
    if not raw:
        return KV_FRACTION
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0.05 <= value <= 0.9:
        raise QuailError(f"QUAIL_KV_FRACTION must be a number from 0.05 to 0.9 (the share of "
                         f"free GPU memory the KV arena takes); got {raw!r}")
    return value


def build_gpu_model(config: Any, state_dict: dict, fp8: bool = False, device: str = "cuda",
                    kv_fraction: float | None = None, page_size: int = 64,
                    kv_fp8: bool | None = None,
                    **options: Any) -> GpuCausalLM:
    """GpuCausalLM + a paged arena taking `kv_fraction` of the GPU memory free after loading
    (`kv_fp8`: e4m3 K/V, gpu/paged_kv.py; None: as QUAIL_KV_DTYPE says). `options`:
    GpuCausalLM keywords (fp8_proj, fp32_residual)."""
    return attach_arena(GpuCausalLM(config, state_dict, fp8=fp8, device=device, **options),
                        kv_fraction, page_size, kv_fp8)


def attach_arena(model: GpuCausalLM, kv_fraction: float | None = None, page_size: int = 64,
                 kv_fp8: bool | None = None) -> GpuCausalLM:
    """Give `model` a paged arena of `kv_fraction` of the GPU memory free now (None: as
    QUAIL_KV_FRACTION says); an fp8 one (`kv_fp8`; None: as QUAIL_KV_DTYPE says, so benches
    and probes that build their model follow it too) holds about twice the pages in the same
    bytes."""
    kv_fp8 = kv_fp8_requested() if kv_fp8 is None else kv_fp8
    kv_fraction = kv_fraction_requested() if kv_fraction is None else kv_fraction
    config = model.config
    free, _ = torch.cuda.mem_get_info(model.device)
    budget = int(free * kv_fraction)
    model.arena = PagedKVArena.for_budget(config.num_layers, config.num_kv_heads, config.head_dim,
                                          budget, page_size, model.dtype, model.device, kv_fp8)
    log.info("paged KV arena: %d pages of %d tokens (%s KV; %.1f of %.1f GiB free)",
             model.arena.num_pages, page_size,
             "fp8" if kv_fp8 else str(model.dtype).removeprefix("torch."), budget / 2**30,
             free / 2**30)
    return model


def precision_model_id(spec: str, fp8: bool, fp8_proj: tuple[str, ...] | None,
                       fp8_block: bool = False, kv_fp8: bool = False) -> str:
    """The engine's model id: fp8 answers differ from bf16 ones beyond rounding, so they are a
    different model to the answer cache and the reports ("spec@fp8", "spec@fp8[gate_up,down]",
    "spec@fp8-block"); so do an fp8 KV arena's ("spec@kv-fp8", "spec@fp8+kv-fp8")."""
    kv = "kv-fp8" if kv_fp8 else ""
    if not fp8:
        return f"{spec}@{kv}" if kv else spec
    name = "fp8-block" if fp8_block else "fp8"
    if fp8_proj is not None:
        name = f"{name}[{','.join(fp8_proj)}]"
    return f"{spec}@{name}+{kv}" if kv else f"{spec}@{name}"


class GpuEngine(LocalEngine):
    def __init__(self, model: GpuCausalLM, tokenizer: Any, config: Any = None,
                 model_id: str = "local", token_budget: int | None = None, **kwargs: Any):
        super().__init__(model, tokenizer, config, model_id=model_id, device=model.device,
                         **kwargs)
        self.runner = GpuRunner(model, self.stats, token_budget)
        # where `load` spent its time (checkpoint_s, model_s, arena_s, warm_up_s, and the
        # warm-up's kernels and kernel_s): what a cold start's load is made of
        self.load_phases: dict[str, float] = {}

    def _prefix_cache(self) -> PrefixCache:
        """Content-shared pages live in the paged arena itself: the index holds each page it
        indexes, and an allocation short of free pages evicts its unpinned ones (LRU)."""
        arena = self.model.arena
        cache = PrefixCache(PagedPageStore(arena), None, hold=lambda p: arena.hold_pages([p]),
                            drop=lambda p: arena.free_pages([p]))
        # at least 1/16 of the arena at a time: each eviction walks the index once
        arena.reclaim = lambda need: cache.index.evict(max(need, arena.num_pages // 16))
        return cache

    def take_pass_log(self) -> list[dict]:
        """The forward passes' shapes and GPU seconds since the last call (gpu/runner.py)."""
        return self.runner.take_pass_log()

    def _path_budget(self) -> int:
        """Path prefixes a call may hold: one page of its own each (the rest are its anchor's),
        within what a batch may keep (_stored_kv_tokens)."""
        return self._stored_kv_tokens() // self.model.arena.page_size

    def _free_path(self, kv: Any) -> None:
        kv.release()

    def _stored_kv_tokens(self) -> int:
        """A quarter of the pages a batch can get (free, or cached and evictable): a batch's
        rows hold their KV in the arena until its run ends (an fp8 filter's batch, sized by
        engine time, can hold more tokens than the whole arena)."""
        arena = self.model.arena
        return (arena.num_free_pages + self.prefix_cache.index.num_pages) * arena.page_size // 4

    def _decode_room(self):
        """Free pages and the prefix cache's (evicted on demand when an allocation is short), less
        the cached pages running decode sequences read (evicting those frees nothing)."""
        arena = self.model.arena

        def room() -> tuple[int, int]:
            cached = 0
            if self.prefix_cache is not None:
                cached = self.prefix_cache.index.num_pages - self._decode_held_pages()
            return (arena.num_free_pages + cached) * arena.page_size, arena.page_size
        return room

    def _label_kv_tokens(self) -> int:
        """A quarter of the paged arena: label scoring keeps each prompt's KV for its label
        spellings (a few thousand reviews at once can fill the arena)."""
        arena = self.model.arena
        return max(arena.page_size, arena.num_pages * arena.page_size // 4)

    @classmethod
    def load(cls, spec: str = "default", device: str = "cuda", dtype: Any = None,
             fp8: bool = False, fp8_proj: tuple[str, ...] | None = None,
             tokenizer: Any = None, fp8_block: bool = False, kv_fp8: bool | None = None,
             **kwargs: Any) -> GpuEngine:
        """`fp8_proj`: which projections run in fp8 when `fp8` (default: all of them);
        `fp8_block`: block-scaled rather than per-channel fp8 (gpu/linear.py). The weights go
        from the files to the GPU directly (gpu/load.py); fp8 quantizes there (an FP8
        checkpoint's blocks are used as they are). `tokenizer`: the model's tokenizer when the
        caller has it loaded already. `kv_fp8`: the KV arena in e4m3 (gpu/paged_kv.py; None:
        as QUAIL_KV_DTYPE says, off by default)."""
        kv_fp8 = kv_fp8_requested() if kv_fp8 is None else kv_fp8
        compile_log.install()  # kernels the load itself compiles go to the kept cache too
        clock = time.perf_counter()
        phases = {}

        def lap(name: str) -> None:  # (seconds since the last lap, for `load_phases`)
            nonlocal clock
            now = time.perf_counter()
            phases[name] = round(now - clock, 3)
            clock = now

        state, tokenizer, config = load_checkpoint(spec, device, dtype, tokenizer)
        lap("checkpoint_s")
        options = {"fp8_proj": fp8_proj} if fp8_proj is not None else {}
        model = GpuCausalLM(config, state, fp8=fp8, device=device, fp8_block=fp8_block,
                            **options)
        del state  # the bf16 originals of fp8 weights, and the GEMMs' concatenated inputs
        torch.cuda.empty_cache()
        lap("model_s")
        engine = cls(attach_arena(model, kv_fp8=kv_fp8), tokenizer, config,
                     model_id=precision_model_id(spec, fp8, fp8_proj, fp8_block, kv_fp8),
                     **kwargs)
        lap("arena_s")
        engine.warm_up()
        lap("warm_up_s")
        engine.load_phases = {**phases, **engine.load_phases}
        return engine

    def warm_up(self) -> None:
        """One pass of each kind a query runs (plain prompts, a prefix store, prompts over a
        resident prefix), so kernel compilation and library plan selection happen while the
        model loads (reported as load time) rather than inside the first operator."""
        compile_log.install()
        start = time.perf_counter()
        compiled = compile_log.totals()
        stats = self.stats.__dict__.copy()
        vocab = (0, 1)
        # Triton compiles a variant per attention tile shape (chosen by a pass's longest own
        # sequence: quail_kernels.attention_tile.default_blocks), per output kind (plain passes
        # write fp8, passes over a prefix their partials and log-sum-exps), per number of prefix
        # segments, and per integer specialization (1, multiples of 16, other): one pass of
        # each. A variant the warm-up misses compiles inside the first query that needs it
        # (bench/quailb/gpu_table.py reports such compilations per query).
        # (lengths cut to what a small arena and pass hold: a test's engine)
        budget = self.runner.scheduler.token_budget
        arena = self.model.arena
        store_len = min(704, arena.num_pages * arena.page_size // 4 - 1, budget // 2 - 1)
        page = arena.page_size
        for extra in (1, 0):  # token counts odd, then multiples of 16
            stores = [SeqJob([1] * (store_len + extra), read=(), store_kv=True)
                      for _ in range(2)]
            # prefixes whose block-table rows are one page wide and 16 pages wide (the width
            # is an integer argument of the prefix kernel: 1 and multiples of 16 specialize)
            widths = [SeqJob([1] * min(n, store_len + extra), read=(), store_kv=True)
                      for n in (page // 2 + extra, 15 * page + 8 + extra)]
            self.runner.run(stores + widths)
            for longest in WARM_UP_LENGTHS:
                n = min(longest, budget // 2 - 4) + extra
                self.runner.run([SeqJob([1] * n, vocab=vocab), SeqJob([1] * 3, vocab=vocab)])
                self.runner.run([SeqJob([1] * n, prefix=stores[0].kv, vocab=vocab)])
                self.runner.run([SeqJob([1] * n, prefix=s.kv, vocab=vocab) for s in stores])
            longest = min(WARM_UP_LENGTHS[-1], budget // 2 - 4) + extra
            if longest >= attention.SHORT_SPLIT:  # passes split into Triton launches by length
                share = attention.SHORT_SHARE / (1 - attention.SHORT_SHARE)
                for n in WARM_UP_LENGTHS[:-1]:
                    count = math.ceil(share * longest / (n + extra))  # short ones: most tokens
                    if longest + count * (n + extra) > budget:
                        continue
                    for prefix in (None, stores[0].kv):
                        self.runner.run([SeqJob([1] * m, prefix=prefix, vocab=vocab)
                                         for m in [longest] + [n + extra] * count])
            # prefixes of >= 1,024 keys take the long-prefix tiles (default_blocks); block
            # tables 17 and 32 pages wide
            room = min(budget // 2, arena.num_pages * page // 4)
            long_widths = [SeqJob([1] * n, read=(), store_kv=True)
                           for n in (17 * page + extra, 32 * page - 8 + extra) if n < room]
            if long_widths:
                self.runner.run(long_widths)
            widths += long_widths
            for w in widths:
                self.runner.run([SeqJob([1] * (9 + extra), prefix=w.kv, vocab=vocab)])
            self.runner.run([SeqJob([1], vocab=vocab)])  # a pass of one token
            self.runner.run([SeqJob([1], prefix=stores[0].kv, vocab=vocab)])
            for s in stores + widths:
                s.kv.release()
        if self.model.device.type == "cuda":
            torch.cuda.synchronize(self.model.device)
        self.runner.take_pass_log()  # nor are its passes: they would show in the first query's
        # timeline (as GPU time beyond that query's own wall time)
        self.stats.__dict__.update(stats)  # warm-up tokens are nobody's work
        count, seconds = (a - b for a, b in zip(compile_log.totals(), compiled))
        log.info("warmed up the GPU kernels in %.2f s (%d Triton kernels compiled or loaded in "
                 "%.2f s)", time.perf_counter() - start, count, seconds)
        self.load_phases.update(kernels=count, kernel_s=round(seconds, 3))

    def release(self, handle: PrefixHandle) -> None:
        entry = self.arena.get(handle.id)
        super().release(handle)
        if not self.arena.has(handle.id):
            entry.release()
