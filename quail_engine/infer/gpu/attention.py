"""One layer's attention on the GPU path, and which kernel takes which part of it.

Each query row sees (a) its own sequence causally: our Triton varlen kernel; and (b), when its
sequence continues a resident prefix (a join partner over its anchor), every key of that
prefix. For (b) the bulk of a long segment (all the queries that share one prefix) goes to a
library kernel, cuDNN's fused attention (faster than our Triton kernel at the join's shape on
the H200; bench/probes/backends.py measures both), and the rest to our Triton kernel over the
arena pages. The partials are merged exactly by their log-sum-exps, fused with the fp8
quantization of the O-projection input.

cuDNN builds an execution plan per new shape (paid inside the pass that first meets it;
bench/probes/backends.py `--only new_shapes` measures it), so its calls use few shapes:
query windows of exactly `chunk_rows` rows (a window may overlap rows of other segments; those
outputs are discarded) and key counts in whole multiples of `key_grain` (the remaining tail
keys, fewer than `key_grain` rounded up to whole pages, go to the Triton kernel through a
block-table row shifted past them). Segments shorter than `min_rows` stay on Triton (a window of
`chunk_rows` rows pays off only once most of its rows are real, at the two kernels' rates;
bench/probes/join_variants.py measures windows and key grains).

Part (a) of a long sequence (>= `causal_min` tokens: agent-trace snapshots of many thousand
tokens, long reports) goes to cuDNN's causal attention too (faster than our kernel at those
lengths; bench/probes/profile_query.py --routes and bench/probes/ab_routes.py measure the
route), one call per sequence over its rows rounded up to `causal_rows` (16 shapes per doubling
of length; the extra rows are the next sequences' or zeros, and a causal row never sees a later
one, so the real rows are exact); the other sequences stay on the Triton kernel.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from quail_engine.infer.gpu.paged_kv import PagedPrefix
from quail_engine.infer.gpu.staging import to_device
from quail_kernels.kv_fp8 import KV_FP8, dequantize_kv, scales_by_token
from quail_kernels.lse_merge import lse_merge
from quail_kernels.prefix_attention import prefix_amax, prefix_attention
from quail_kernels.varlen_attention import (
    causal_amax,
    varlen_attention,
    varlen_attention_fp8,
    varlen_attention_grouped,
)

log = logging.getLogger(__name__)

DenseAttend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float],
                       tuple[torch.Tensor, torch.Tensor]]


def cudnn_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                 causal: bool = False):
    """Every query row of q [n, Hq, D] over all keys k/v [L, Hkv, D] (GQA) with cuDNN ->
    (o [n, Hq, D], lse [n, Hq] natural-log, both views of cuDNN's outputs). `causal`: row i
    sees keys 0..i (n == L)."""
    res = torch.ops.aten._scaled_dot_product_cudnn_attention(
        q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0),
        v.transpose(0, 1).unsqueeze(0), None, True, 0.0, causal, False, scale=scale)
    n, hq = q.shape[0], q.shape[1]
    return res[0][0].transpose(0, 1), res[1].reshape(hq, n).t()


def cudnn_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float):
    return cudnn_attend(q, k, v, scale, causal=True)


@dataclass(frozen=True)
class LibAttention:
    """A library's attention for the bulk of long prefix segments (`attend`) and for long
    sequences' own causal part (`causal`, optional), and how they are fed."""
    attend: DenseAttend
    chunk_rows: int = 4096
    min_rows: int = 2560
    key_grain: int = 256
    causal: DenseAttend | None = None
    causal_min: int = 2048
    causal_grain: int = 128

    def causal_rows(self, n: int) -> int:
        """The rows of the library's call for an n-token sequence: n rounded up to a 32nd of
        its power of two (at least `causal_grain`): 16 shapes per doubling of length, under 1/16
        extra rows (2.2% on average over 2-32k tokens, 4.4% extra causal work)."""
        grain = max(self.causal_grain, (1 << max(n - 1, 1).bit_length()) // 32)
        return -(-n // grain) * grain


def probe_cudnn(device: torch.device, num_heads: int, num_kv_heads: int, head_dim: int,
                dtype: torch.dtype = torch.bfloat16) -> LibAttention | None:
    """LibAttention on cuDNN if its fused attention runs here at these heads and dtype (bf16 or
    fp16; float32 models stay on Triton), else None (logged); its causal part likewise."""
    if device.type != "cuda" or not torch.backends.cudnn.is_available() or \
            dtype not in (torch.bfloat16, torch.float16):
        return None
    try:
        q = torch.randn(64, num_heads, head_dim, device=device, dtype=dtype)
        k = torch.randn(256, num_kv_heads, head_dim, device=device, dtype=dtype)
        o, lse = cudnn_attend(q, k, k, head_dim ** -0.5)
        if not (torch.isfinite(o).all() and torch.isfinite(lse).all()):
            raise RuntimeError("non-finite output on random inputs")
    except (RuntimeError, AttributeError) as exc:  # AttributeError: a torch without the op
        log.warning("cuDNN fused attention unavailable (%s); prefix attention stays on Triton",
                    str(exc).splitlines()[0][:200])
        return None
    try:
        qc, kc, vc = (torch.randn(256, h, head_dim, device=device, dtype=dtype)
                      for h in (num_heads, num_kv_heads, num_kv_heads))
        o, lse = cudnn_causal(qc, kc, vc, head_dim ** -0.5)
        if not (torch.isfinite(o).all() and torch.isfinite(lse).all()):
            raise RuntimeError("non-finite output on random inputs")
    except RuntimeError as exc:
        log.warning("cuDNN causal attention unavailable (%s); own attention stays on Triton",
                    str(exc).splitlines()[0][:200])
        return LibAttention(cudnn_attend)
    return LibAttention(cudnn_attend, causal=cudnn_causal)


@dataclass(frozen=True)
class LibChunk:
    """One library call: query rows [window, window + chunk_rows) against the first
    `keys` keys of segment `seg`'s prefix; its rows [r0, r1) are kept."""
    seg: int
    window: int
    r0: int
    r1: int


@dataclass
class PrefixPlan:
    table: torch.Tensor              # [S, W] int32 Triton block table (lib segments: tail pages)
    lens: torch.Tensor               # [S] int32 Triton prefix lengths (lib segments: tails)
    lib_keys: dict[int, int] = field(default_factory=dict)          # seg -> keys for the lib
    lib_pages: dict[int, torch.Tensor] = field(default_factory=dict)  # seg -> their page ids
    runs: list[tuple[int, int, LibChunk | None]] = field(default_factory=list)
    max_len: int = 0                 # the longest Triton prefix (its tile shape)


@dataclass
class CausalPlan:
    """Each sequence's own causal attention: which sequences the library takes (by rows), and
    the Triton launches of the rest, grouped by length."""
    lib: list[tuple[int, int]]              # (first row, tokens) per sequence for the library
    groups: list[tuple[torch.Tensor, int]]  # per Triton launch: int32 sequences, the longest


# A pass's sequences shorter than SHORT_SPLIT and those at least as long go to separate Triton
# launches, each with the tiles of its own longest sequence (attention_tile.default_blocks),
# when the short ones hold at least SHORT_SHARE of the Triton tokens: a pass of short documents
# with a few long ones otherwise runs every document with the long tiles, while a pass whose
# tokens are split about evenly between short and long runs slower split (two launches, each
# filling the GPU less). bench/probes/attention_passes.py replays real passes both ways.
SHORT_SPLIT = 1024
SHORT_SHARE = 0.8


def plan_causal(lengths: Sequence[int], device: torch.device, lib: LibAttention | None,
                split_at: int | None = None) -> CausalPlan | None:
    """lengths: the packed sequences' tokens in row order. None: one Triton launch over all.
    `split_at`: SHORT_SPLIT unless given (0: no split by length)."""
    split_at = SHORT_SPLIT if split_at is None else split_at
    to_lib = lib is not None and lib.causal is not None and \
        max(lengths, default=0) >= lib.causal_min
    lib_rows, short, long = [], [], []
    start = 0
    for i, n in enumerate(lengths):
        if to_lib and n >= lib.causal_min:
            lib_rows.append((start, n))
        elif n:
            (short if n < split_at else long).append(i)
        start += n
    short_tokens = sum(lengths[i] for i in short)
    if short_tokens < SHORT_SHARE * (short_tokens + sum(lengths[i] for i in long)):
        short, long = [], long + short  # one launch
    if not lib_rows and not (short and long):
        return None
    groups = [(to_device(sorted(seqs), device, torch.int32), max(lengths[i] for i in seqs))
              for seqs in (long, short) if seqs]
    return CausalPlan(lib_rows, groups)


def _padded_rows(t: torch.Tensor, start: int, n: int, rows: int) -> torch.Tensor:
    """t[start:start + rows], or those n real rows then zeros where t ends first."""
    if start + rows <= t.shape[0]:
        return t[start:start + rows]
    out = t.new_zeros((rows, *t.shape[1:]))
    out[:n] = t[start:start + n]
    return out


def own_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, batch, scale: float,
                  lib: LibAttention | None, window: int | None = None,
                  out_dtype: torch.dtype | None = None):
    """Each sequence's causal attention over its own tokens -> (o [T, Hq, D], lse [T, Hq]).
    `out_dtype`: q's unless given; float32 for a partial that an LSE merge or the fp8
    quantization reads, so that the row rounds once, as the row computed in one pass does."""
    plan: CausalPlan | None = batch.causal_plan
    if plan is None:
        return varlen_attention(q, k, v, batch.cu_seqlens, batch.max_seqlen, scale,
                                window=window, out_dtype=out_dtype)
    if window is not None and plan.lib:
        raise ValueError("a sliding-window layer cannot send its sequences to the library's "
                         "causal attention (models with sliding layers stay on Triton)")
    o, lse, _ = varlen_attention_grouped(q, k, v, batch.cu_seqlens, batch.max_seqlen,
                                         plan.groups, scale, window=window,
                                         out_dtype=out_dtype)
    for start, n in plan.lib:
        rows = lib.causal_rows(n)
        lo, ll = lib.causal(*(_padded_rows(t, start, n, rows) for t in (q, k, v)), scale)
        o[start:start + n] = lo[:n]
        lse[start:start + n] = ll[:n]
    return o, lse


def plan_prefix(segments: Sequence[tuple[PagedPrefix | None, int, int]], total_rows: int,
                page_size: int, device: torch.device, lib: LibAttention | None) -> PrefixPlan:
    """segments: (prefix or None, first row, end row) covering [0, total_rows) in order."""
    # the library's keys end on a page boundary so the Triton tail starts at a whole page
    grain = math.lcm(lib.key_grain, page_size) if lib is not None else 0
    width = max([len(p.pages) for p, _, _ in segments if p is not None] or [1])
    table = torch.zeros(len(segments), width, dtype=torch.int32)
    lens = [0] * len(segments)
    lib_keys: dict[int, int] = {}
    runs: list[tuple[int, int, LibChunk | None]] = []
    for i, (p, start, end) in enumerate(segments):
        keys = 0
        if (p is not None and lib is not None and end - start >= lib.min_rows
                and total_rows >= lib.chunk_rows):
            keys = p.num_tokens // grain * grain
        if p is not None:
            skip = keys // page_size
            pages = p.pages[skip:]
            table[i, :len(pages)] = torch.tensor(pages, dtype=torch.int32)
            lens[i] = p.num_tokens - keys
        if keys:
            lib_keys[i] = keys
            for r0 in range(start, end, lib.chunk_rows):
                r1 = min(r0 + lib.chunk_rows, end)
                runs.append((r0, r1, LibChunk(i, min(r0, total_rows - lib.chunk_rows), r0, r1)))
        elif runs and runs[-1][2] is None and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], end, None)
        else:
            runs.append((start, end, None))
    lib_pages = {i: to_device(segments[i][0].pages[: keys // page_size], device)
                 for i, keys in lib_keys.items()}
    return PrefixPlan(to_device(table, device), to_device(lens, device, torch.int32),
                      lib_keys, lib_pages, runs, max(lens, default=0))


# A decode step's prefix attention on a GPU: one query token per sequence, so the tile's rows
# are its GQA heads (BLOCK_M 16 = 4 tokens' worth of 4 heads) and the loads dominate; two warps
# per program keep more programs resident. Chosen by bench/probes/decode_attention.py at the
# Qwen3-4B head shape (128-wide heads, pages of 64), for each arena dtype: an e4m3 tile of the
# same keys holds half the bytes, so its best tile need not be the bf16 one.
DECODE_BLOCKS = (16, 64, 2, 3)
DECODE_BLOCKS_FP8 = (16, 64, 2, 3)


def decode_blocks(q: torch.Tensor, arena_k: torch.Tensor) -> tuple[int, int, int, int] | None:
    """The decode tile of the arena's dtype where it was measured (a CUDA device, heads of at
    most 128, pages a multiple of 64 tokens), else None (the kernel's own choice)."""
    if q.device.type == "cuda" and q.shape[-1] <= 128 and arena_k.shape[1] % 64 == 0:
        return DECODE_BLOCKS_FP8 if arena_k.dtype == KV_FP8 else DECODE_BLOCKS
    return None


def lib_pages(cache: torch.Tensor, scales: torch.Tensor | None, pages: torch.Tensor,
              dtype: torch.dtype) -> torch.Tensor:
    """A layer's arena `cache` [P, PAGE, Hkv, D] at `pages` -> their [len * PAGE, Hkv, D] rows
    for the library's kernel (an fp8 arena's dequantized by its `scales` [P, Hkv, PAGE] to
    `dtype`)."""
    if scales is None:
        return cache[pages].flatten(0, 1)
    rows = cache.view(torch.uint8)[pages].view(KV_FP8)  # (gathered as bytes)
    return dequantize_kv(rows, scales_by_token(scales[pages])).to(dtype).flatten(0, 1)


def layer_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, batch,
                    arena_k: torch.Tensor | None, arena_v: torch.Tensor | None, scale: float,
                    fp8: bool, lib: LibAttention | None, window: int | None = None,
                    kv_scales: Sequence[torch.Tensor] | None = None):
    """-> (o [T, Hq * D] in q's dtype or fp8, per-token scale [T, 1] when fp8). `window`: a
    sliding-window layer (then the batch's plan must not use the library kernel).
    `kv_scales`: (k_scale, v_scale) [P, Hkv, PAGE] of an fp8 arena (PagedKVArena.layer)."""
    num_tokens = q.shape[0]
    k_scale, v_scale = kv_scales if kv_scales else (None, None)
    if batch.decode:  # each token over its prefix, itself included (batch.pack_decode)
        plan = batch.prefix_plan
        # an fp8 row's bound: the max |v| over every key it sees, all of them before it or
        # itself, as the prefill of the same tokens takes it (row_bound), so an answer
        # recomputed by prefill after a preemption rounds as its decode did. Read from the
        # tiles the kernel loads; a sliding layer (it loads its window only) and an e4m3
        # arena take each row's own max.
        bound = (torch.zeros(num_tokens, device=q.device) if fp8 and window is None
                 and k_scale is None else None)
        op, lp = prefix_attention(q, arena_k, arena_v, batch.seg_cu, plan.table, plan.lens, 1,
                                  scale, blocks=decode_blocks(q, arena_k),
                                  window=window,
                                  positions=batch.positions if window is not None else None,
                                  max_prefix_len=plan.max_len, k_scale=k_scale,
                                  v_scale=v_scale, vmax=bound)
        return lse_merge(op, lp, fp8=True, bound=bound) if fp8 else \
            (op.view(num_tokens, -1), None)
    plan_c: CausalPlan | None = batch.causal_plan
    if not batch.has_prefix and fp8 and (plan_c is None or not plan_c.lib):
        # quantized in the attention's epilogue
        if plan_c is None:
            o, _, scales = varlen_attention_fp8(q, k, v, batch.cu_seqlens, batch.max_seqlen,
                                                scale, window=window)
        else:
            o, _, scales = varlen_attention_grouped(q, k, v, batch.cu_seqlens,
                                                    batch.max_seqlen, plan_c.groups, scale,
                                                    fp8=True, window=window)
        return o.view(num_tokens, -1), scales
    # a merged or separately quantized row keeps its parts in float32 and takes the one-pass
    # kernel's fp8 bound (row_bound: the max |v| up to the row): the same row, fresh or over
    # cached keys, then rounds alike (attention_tile.softmax_update keeps the tiles' products
    # alike)
    partial = batch.has_prefix or fp8
    o, lse = own_attention(q, k, v, batch, scale, lib, window,
                           out_dtype=torch.float32 if partial else None)
    if not batch.has_prefix:
        if not fp8:
            return o.view(num_tokens, -1), None
        return lse_merge(o, lse, fp8=True, bound=row_bound(v, batch, None, None, {}))
    plan: PrefixPlan = batch.prefix_plan
    if window is not None and plan.lib_keys:
        raise ValueError("a sliding-window layer cannot read a prefix split for the library "
                         "kernel (models with sliding layers keep the prefix on Triton)")
    op, lp = prefix_attention(q, arena_k, arena_v, batch.seg_cu, plan.table, plan.lens,
                              batch.max_seg_len, scale, window=window,
                              positions=batch.positions if window is not None else None,
                              max_prefix_len=plan.max_len, k_scale=k_scale, v_scale=v_scale,
                              out_dtype=torch.float32)
    kv = {seg: (lib_pages(arena_k, k_scale, plan.lib_pages[seg], q.dtype),
                lib_pages(arena_v, v_scale, plan.lib_pages[seg], q.dtype))
          for seg in plan.lib_keys}
    bound = row_bound(v, batch, arena_v, v_scale, kv) if fp8 else None
    if not plan.lib_keys:
        return lse_merge(o, lse, op, lp, fp8=fp8, bound=bound, dtype=q.dtype)
    rows = torch.empty(num_tokens, o.shape[1] * o.shape[2], device=q.device,
                       dtype=torch.float8_e4m3fn if fp8 else q.dtype)
    scales = torch.empty(num_tokens, 1, device=q.device) if fp8 else None
    for r0, r1, chunk in plan.runs:
        out = (rows[r0:r1], scales[r0:r1] if fp8 else None)
        third = None
        if chunk is not None:
            kk, vv = kv[chunk.seg]
            qo, ql = lib.attend(q[chunk.window:chunk.window + lib.chunk_rows], kk, vv, scale)
            a, b = r0 - chunk.window, r1 - chunk.window
            third = (qo[a:b], ql[a:b])
        lse_merge(o[r0:r1], lse[r0:r1], op[r0:r1], lp[r0:r1], fp8=fp8, third=third, out=out,
                  bound=bound[r0:r1] if bound is not None else None, dtype=q.dtype)
    return rows, scales


def row_bound(v: torch.Tensor, batch, arena_v: torch.Tensor | None,
              v_scale: torch.Tensor | None, lib_kv: dict) -> torch.Tensor | None:
    """[T] float32: each packed row's fp8 scale bound, the max |v| over the keys it sees and
    those before them (its sequence's rows up to it, and its cached prefix's in the arena,
    `lib_kv` holding the library's share of a segment's prefix): varlen_attention.causal_amax,
    what the one-pass kernel takes. It reads nothing after the row, so a row rounds alike
    however its sequence was split into cached and fresh rows. None with an e4m3 arena (its
    cached values are not the fresh ones; each row then takes its own max)."""
    if batch.has_prefix and v_scale is not None:
        return None
    if not batch.has_prefix:
        return causal_amax(v, batch.cu_seqlens)
    plan: PrefixPlan = batch.prefix_plan
    prefix = prefix_amax(arena_v, plan.table, plan.lens, plan.max_len)
    for seg, (_, vv) in lib_kv.items():
        prefix[seg] = torch.maximum(prefix[seg], vv.abs().amax().float())
    return causal_amax(v, batch.cu_seqlens, start=prefix[batch.seq_seg()])
