"""Suffix-over-resident-prefix attention: the queries of many partner suffixes against one
anchor's KV held in the paged arena (every prefix key visible), returning the log-sum-exp.

q [T, Hq, D] (packed suffix tokens; unit last stride); k_cache/v_cache [P, PAGE, Hkv, D]
arena pages; cu_seqlens_q [S+1] int32 splits q into S segments, each segment all the suffix
tokens that share one prefix; block_table [S, max_pages] int32 page ids of each segment's
prefix; prefix_lens [S] int32 (0: no prefix -> out 0, lse -inf). Returns out [T, Hq, D] and
lse [T, Hq] float32, to be merged (lse_merge) with the suffix's own causal attention.

Kernel: grid (cdiv(max_seqlen_q * G, BLOCK_M), S, Hkv); GQA rows as in attention_tile; key
tiles of BLOCK_N tokens inside one page (PAGE % BLOCK_N == 0), mask only past prefix_len.
An e4m3 arena (KV_FP8; kv_fp8.py) also passes k_scale/v_scale [P, Hkv, PAGE] float32 (one per
token and KV head, head-major within a page, contiguous): a tile's scales multiply its score
columns and its probabilities before the PV product, accumulating in float32 as the bf16
arena does.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from quail_kernels.attention_tile import (
    LOG2E,
    default_blocks,
    finish,
    gqa_rows,
    softmax_step,
    softmax_update,
    tile_dot,
)
from quail_kernels.checks import check_tensor
from quail_kernels.kv_fp8 import KV_FP8, dequantize_kv, scales_by_token
from quail_kernels.varlen_attention import _check_qkv, attend_ref


@triton.jit
def _scaled_step(q, k, v, ks, vs, allowed, m_i, l_i, acc, qk_scale, MASKED: tl.constexpr):
    """softmax_step over an e4m3 tile: q [M, D] in the compute dtype (the kernel's QC), k [D, N]
    e4m3 as stored, v [N, D] already float16, ks/vs [N] their scales. The scales go on the
    scores' columns and the probabilities' columns (exactly the dequantized tile's product,
    without a dequantized copy of the tile rounded to a 16-bit type)."""
    m_new, l_i, p, alpha = softmax_update(tile_dot(q, k.to(q.dtype)) * (qk_scale * ks[None, :]),
                                          allowed, m_i, l_i, MASKED, tl.float32)
    acc = acc * alpha[:, None] + tile_dot((p * vs[None, :]).to(q.dtype), v.to(q.dtype))
    return m_new, l_i, acc


@triton.jit
def _interleave4(b0, b1, b2, b3):
    """Four [N, W] tensors (byte i of each word) -> [N, 4 W] with each word's four in order.
    `join` adds a minor axis, so join(join(b0, b2), join(b1, b3)) puts b_(2i + j) at [.., i, j]
    and the row-major reshape reads b0, b1, b2, b3; nesting them as (b0, b1), (b2, b3) reads
    b0, b2, b1, b3, which swaps the middle two columns of every four."""
    return tl.reshape(tl.join(tl.join(b0, b2), tl.join(b1, b3)), (b0.shape[0], b0.shape[1] * 4))


@triton.jit
def _e4m3_words_to_f16(w, PTX: tl.constexpr):
    """int32 words of four e4m3 values [N, D // 4] (byte i of a word: column 4 w + i) ->
    float16 [N, D], converted where the words were loaded. Converting the e4m3 tile itself would
    let Triton move the conversion into the dot operand's layout, and an 8-bit V, whose
    reduction runs across its rows, is read into that layout one byte at a time; converted
    first, the float16 tile is transposed by ldmatrix as a bf16 V is. PTX: one instruction per
    two values (compiled kernels); else the bytes are shifted out and bitcast (the interpreter,
    which runs no PTX, so the CPU tests cover the words' layout)."""
    if PTX:
        b0, b1, b2, b3 = tl.inline_asm_elementwise(
            "{ .reg .b16 lo, hi; .reg .b32 a, b; mov.b32 {lo, hi}, $4; "
            "cvt.rn.f16x2.e4m3x2 a, lo; cvt.rn.f16x2.e4m3x2 b, hi; "
            "mov.b32 {$0, $1}, a; mov.b32 {$2, $3}, b; }",
            "=h,=h,=h,=h,r", [w], dtype=(tl.float16, tl.float16, tl.float16, tl.float16),
            is_pure=True, pack=1)
    else:
        b0, b1, b2, b3 = _e4m3_byte(w, 0), _e4m3_byte(w, 8), _e4m3_byte(w, 16), _e4m3_byte(w, 24)
    return _interleave4(b0, b1, b2, b3)


@triton.jit
def _e4m3_byte(w, SHIFT: tl.constexpr):
    """The e4m3 value in bits SHIFT..SHIFT + 7 of int32 words `w`, as float16."""
    return ((w >> SHIFT) & 0xFF).to(tl.uint8).to(tl.float8e4nv, bitcast=True).to(tl.float16)


@triton.jit
def _tile_slots(bt_ptr, seg, s_bt, n0, PAGE: tl.constexpr, BLOCK_N: tl.constexpr):
    """The page id (one block-table entry: a tile lies inside one page) and the slots of a key
    tile's BLOCK_N columns from n0 on."""
    page = tl.load(bt_ptr + seg * s_bt + n0 // PAGE)
    return page.to(tl.int64), n0 % PAGE + tl.arange(0, BLOCK_N)


@triton.jit
def _tile(q, k_ptr, v_ptr, ks_ptr, vs_ptr, page, slot, kv_head, d, col_ok, allowed,
          m_i, l_i, acc, vmax, qk_scale, s_kp, s_ks, s_kh, s_vp, s_vs, s_vh, s_sp, s_sh,
          MASKED: tl.constexpr, KV_FP8: tl.constexpr, V_WORDS: tl.constexpr,
          PTX: tl.constexpr, TRACK_V: tl.constexpr):
    """Load one key tile (`slot` [N] of `page`; columns past col_ok masked when MASKED) and take
    its online-softmax step. V_WORDS: an e4m3 V read as int32 words and
    converted by _e4m3_words_to_f16 (compiled kernels; the interpreter converts the tile).
    TRACK_V (a model-dtype arena): `vmax` also takes the tile's max |v|."""
    k_off = (page * s_kp + slot * s_ks)[None, :] + kv_head * s_kh + d[:, None]
    v_row = page * s_vp + slot * s_vs + kv_head * s_vh
    if MASKED:
        k = tl.load(k_ptr + k_off, mask=col_ok[None, :], other=0.0)
    else:
        k = tl.load(k_ptr + k_off)
    if KV_FP8:
        if V_WORDS:
            w_ptr = v_ptr.to(tl.pointer_type(tl.int32))
            w_off = (v_row // 4)[:, None] + tl.arange(0, d.shape[0] // 4)[None, :]
            if MASKED:
                w = tl.load(w_ptr + w_off, mask=col_ok[:, None], other=0)
            else:
                w = tl.load(w_ptr + w_off)
            v = _e4m3_words_to_f16(w, PTX)
        else:
            if MASKED:
                v = tl.load(v_ptr + v_row[:, None] + d[None, :], mask=col_ok[:, None],
                            other=0.0)
            else:
                v = tl.load(v_ptr + v_row[:, None] + d[None, :])
            v = v.to(tl.float16)
        s_off = page * s_sp + kv_head * s_sh + slot
        if MASKED:
            ks = tl.load(ks_ptr + s_off, mask=col_ok, other=0.0)
            vs = tl.load(vs_ptr + s_off, mask=col_ok, other=0.0)
        else:
            ks = tl.load(ks_ptr + s_off)
            vs = tl.load(vs_ptr + s_off)
        m_i, l_i, acc = _scaled_step(q, k, v, ks, vs, allowed, m_i, l_i, acc, qk_scale, MASKED)
    else:
        if MASKED:
            v = tl.load(v_ptr + v_row[:, None] + d[None, :], mask=col_ok[:, None], other=0.0)
        else:
            v = tl.load(v_ptr + v_row[:, None] + d[None, :])
        if TRACK_V:
            vmax = tl.maximum(vmax, tl.max(tl.max(tl.abs(v.to(tl.float32)), axis=1), axis=0))
        m_i, l_i, acc = softmax_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, MASKED)
    return m_i, l_i, acc, vmax


@triton.jit
def _prefix_attention_kernel(q_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, o_ptr, lse_ptr, cu_ptr,
                             bt_ptr, plen_ptr, pos_ptr, vmax_ptr, window,
                             qk_scale, s_qt, s_qh, s_kp, s_ks, s_kh, s_vp, s_vs, s_vh,
                             s_sp, s_sh, s_ot, s_oh, s_lt, s_bt,
                             G: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             HAS_WINDOW: tl.constexpr, KV_FP8: tl.constexpr,
                             V_WORDS: tl.constexpr, PTX: tl.constexpr, QC: tl.constexpr,
                             TRACK_V: tl.constexpr):
    tile = tl.program_id(0)
    seg = tl.program_id(1)
    kv_head = tl.program_id(2)
    start = tl.load(cu_ptr + seg)
    seqlen = tl.load(cu_ptr + seg + 1) - start
    tok_per_tile: tl.constexpr = BLOCK_M // G
    if tile * tok_per_tile < seqlen:
        prefix_len = tl.load(plen_ptr + seg)
        tok, head, valid = gqa_rows(tile, kv_head, G, BLOCK_M)
        row_ok = valid & (tok < seqlen)
        d = tl.arange(0, D)
        tok64 = (start + tok).to(tl.int64)
        q = tl.load(q_ptr + tok64[:, None] * s_qt + head[:, None] * s_qh + d[None, :],
                    mask=row_ok[:, None], other=0.0)
        if KV_FP8:
            q = q.to(QC)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        vmax = tl.full([], 0.0, tl.float32)
        full_end = prefix_len // BLOCK_N * BLOCK_N
        if HAS_WINDOW:  # every tile masked by the query's absolute position
            full_end = prefix_len * 0  # (zeros of the same type: the loops below do nothing)
            qpos = tl.load(pos_ptr + tok64, mask=row_ok, other=0)
            for n0 in range(0, prefix_len, BLOCK_N):
                cols = n0 + tl.arange(0, BLOCK_N)
                col_ok = cols < prefix_len
                page, slot = _tile_slots(bt_ptr, seg, s_bt, n0, PAGE, BLOCK_N)
                allowed = col_ok[None, :] & (qpos[:, None] - cols[None, :] < window)
                m_i, l_i, acc, vmax = _tile(q, k_ptr, v_ptr, ks_ptr, vs_ptr, page, slot, kv_head,
                                            d, col_ok, allowed, m_i, l_i, acc, vmax, qk_scale,
                                            s_kp, s_ks, s_kh, s_vp, s_vs, s_vh, s_sp, s_sh, True,
                                            KV_FP8, V_WORDS, PTX, False)
            prefix_len = prefix_len * 0
        for n0 in range(0, full_end, BLOCK_N):  # whole tiles: no mask
            page, slot = _tile_slots(bt_ptr, seg, s_bt, n0, PAGE, BLOCK_N)
            m_i, l_i, acc, vmax = _tile(q, k_ptr, v_ptr, ks_ptr, vs_ptr, page, slot, kv_head, d,
                                        None, None, m_i, l_i, acc, vmax, qk_scale, s_kp, s_ks,
                                        s_kh, s_vp, s_vs, s_vh, s_sp, s_sh, False, KV_FP8,
                                        V_WORDS, PTX, TRACK_V)
        if full_end < prefix_len:  # the partial last tile
            col_ok = full_end + tl.arange(0, BLOCK_N) < prefix_len
            page, slot = _tile_slots(bt_ptr, seg, s_bt, full_end, PAGE, BLOCK_N)
            m_i, l_i, acc, vmax = _tile(q, k_ptr, v_ptr, ks_ptr, vs_ptr, page, slot, kv_head, d,
                                        col_ok, col_ok[None, :], m_i, l_i, acc, vmax, qk_scale,
                                        s_kp, s_ks, s_kh, s_vp, s_vs, s_vh, s_sp, s_sh, True,
                                        KV_FP8, V_WORDS, PTX, TRACK_V)
        out, lse = finish(m_i, l_i, acc)
        tl.store(o_ptr + tok64[:, None] * s_ot + head[:, None] * s_oh + d[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
        tl.store(lse_ptr + tok64 * s_lt + head, lse, mask=row_ok)
        if TRACK_V:
            tl.atomic_max(vmax_ptr + seg, vmax)


# The dtype an e4m3 arena's products run in (the kernel's QC), by q's dtype: float16 for a
# 16-bit q (bf16's too: e4m3 values are exact in either, one instruction converts two of them to
# float16 where bf16 takes a second per value, and q and the probabilities round finer in
# float16); float32 for a float32 q, so the reference precision stays exact. Chosen here rather
# than by a branch on q's dtype inside the kernel, which older Triton (3.6) cannot compile.
_FP8_PRODUCTS = {torch.float32: tl.float32, torch.bfloat16: tl.float16, torch.float16: tl.float16}


def _check_arena(q, k_cache, v_cache, cu_seqlens_q, block_table, prefix_lens, k_scale,
                 v_scale):
    fp8 = k_cache.dtype == KV_FP8
    kv_dtypes = (KV_FP8,) if fp8 else (q.dtype,)
    check_tensor("k_cache", k_cache, 4, dtypes=kv_dtypes)
    check_tensor("v_cache", v_cache, 4, dtypes=kv_dtypes)
    if fp8:
        if k_scale is None or v_scale is None:
            raise ValueError("an fp8 KV arena needs k_scale and v_scale [P, Hkv, PAGE]")
        want = (k_cache.shape[0], k_cache.shape[2], k_cache.shape[1])
        for name, t in (("k_scale", k_scale), ("v_scale", v_scale)):
            check_tensor(name, t, 3, dtypes=(torch.float32,))
            if t.shape != want or t.stride() != k_scale.stride():
                raise ValueError(f"{name} {tuple(t.shape)} does not match the arena's "
                                 f"[P, Hkv, PAGE] {want} (or k_scale's strides)")
        _check_qkv(q, *(torch.empty(k_cache.shape[1:], dtype=q.dtype, device="meta")
                        for _ in range(2)))
    else:
        if k_scale is not None or v_scale is not None:
            raise ValueError(f"scales are for an fp8 arena; this one is {k_cache.dtype}")
        _check_qkv(q, k_cache[0], v_cache[0])
    check_tensor("cu_seqlens_q", cu_seqlens_q, 1, dtypes=(torch.int32,))
    check_tensor("block_table", block_table, 2, dtypes=(torch.int32,))
    check_tensor("prefix_lens", prefix_lens, 1, dtypes=(torch.int32,))
    num_segs = cu_seqlens_q.shape[0] - 1
    if block_table.shape[0] != num_segs or prefix_lens.shape[0] != num_segs:
        raise ValueError(f"{num_segs} segments but block_table {tuple(block_table.shape)} "
                         f"and prefix_lens {tuple(prefix_lens.shape)}")


def _words_fit(v_cache: torch.Tensor) -> bool:
    """Whether the kernel may read an e4m3 V as int32 words (_e4m3_words_to_f16): every stride
    and the base 4-byte aligned."""
    return v_cache.data_ptr() % 4 == 0 and all(st % 4 == 0 for st in v_cache.stride()[:3]) \
        and v_cache.stride(3) == 1 and v_cache.shape[3] % 4 == 0


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def prefix_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     cu_seqlens_q: torch.Tensor, block_table: torch.Tensor,
                     prefix_lens: torch.Tensor, max_seqlen_q: int, scale: float,
                     blocks: tuple[int, int, int, int] | None = None,
                     window: int | None = None, positions: torch.Tensor | None = None,
                     max_prefix_len: int = 0, k_scale: torch.Tensor | None = None,
                     v_scale: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
                     vmax: torch.Tensor | None = None):
    """`out_dtype`: the output's dtype (q's unless given; float32 for a partial an LSE merge
    reads). `vmax` [S] float32 (a model-dtype arena, no window): each segment's entry is
    raised to the max |v| over its prefix keys, read from the tiles the kernel loads anyway
    (a decode step's fp8 scale bound over every key it sees: prefix_amax without a second
    read of the prefix). `window` with `positions` [T] (each query's absolute position; prefix keys sit at 0..):
    a query at p sees prefix key j only when p - j < window (Gemma's sliding layers).
    `max_prefix_len`: the longest of prefix_lens if the caller knows it (the tile shape;
    0: the long-prefix tiles). An e4m3 arena (kv_fp8.py) comes with `k_scale`/`v_scale`
    [P, Hkv, PAGE] float32, applied inside the tiles."""
    _check_arena(q, k_cache, v_cache, cu_seqlens_q, block_table, prefix_lens, k_scale, v_scale)
    if window is not None and (window < 1 or positions is None
                               or positions.shape != (q.shape[0],)):
        raise ValueError("a sliding window needs window >= 1 and one position per query token")
    num_tokens, num_heads, head_dim = q.shape
    page = k_cache.shape[1]
    group = num_heads // k_cache.shape[2]
    out = torch.empty(q.shape, device=q.device, dtype=out_dtype or q.dtype)
    lse = torch.empty((num_tokens, num_heads), device=q.device, dtype=torch.float32)
    num_segs = cu_seqlens_q.shape[0] - 1
    if num_tokens == 0 or num_segs == 0:
        return out, lse
    block_m, block_n, warps, stages = blocks or default_blocks(q.device.type, head_dim,
                                                                 max_prefix_len, prefix=True)
    block_n = min(block_n, page)
    if page % block_n:
        raise ValueError(f"page size {page} is not a multiple of BLOCK_N {block_n}")
    fp8 = k_scale is not None
    if vmax is not None and (fp8 or window is not None or vmax.shape != (num_segs,)
                             or vmax.dtype != torch.float32):
        raise ValueError(f"vmax is one float32 per segment ({num_segs}) of a model-dtype arena "
                         f"without a window; got {tuple(vmax.shape)} {vmax.dtype}, "
                         f"fp8 arena {fp8}, window {window}")
    ks, vs = (k_scale, v_scale) if fp8 else (prefix_lens, prefix_lens)  # (unread without fp8)
    grid = (triton.cdiv(max_seqlen_q, block_m // group), num_segs, k_cache.shape[2])
    _prefix_attention_kernel[grid](
        q, k_cache, v_cache, ks, vs, out, lse, cu_seqlens_q, block_table, prefix_lens,
        positions if window is not None else prefix_lens,
        vmax if vmax is not None else lse, window or 0, scale * LOG2E,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        k_scale.stride(0) if fp8 else 0, k_scale.stride(1) if fp8 else 0,
        out.stride(0), out.stride(1), lse.stride(0), block_table.stride(0),
        G=group, D=head_dim, PAGE=page, BLOCK_M=block_m, BLOCK_N=block_n,
        HAS_WINDOW=window is not None, KV_FP8=fp8, V_WORDS=fp8 and _words_fit(v_cache),
        PTX=v_cache.is_cuda and not _interpreting(), QC=_FP8_PRODUCTS[q.dtype],
        TRACK_V=vmax is not None, num_warps=warps, num_stages=stages)
    return out, lse


@triton.jit
def _prefix_amax_kernel(v_ptr, bt_ptr, plen_ptr, out_ptr, s_vp, s_vs, s_bt,
                        N: tl.constexpr, BLOCK: tl.constexpr, PAGE: tl.constexpr,
                        ROWS: tl.constexpr):
    """out[seg] = max(out[seg], max |v| over prefix rows [ROWS * chunk, +ROWS) of the
    segment), those rows inside one page (PAGE % ROWS == 0)."""
    seg = tl.program_id(0)
    chunk = tl.program_id(1)
    length = tl.load(plen_ptr + seg)
    if chunk * ROWS < length:
        first = chunk * ROWS
        page = tl.load(bt_ptr + seg * s_bt + first // PAGE).to(tl.int64)
        rows = first + tl.arange(0, ROWS)
        cols = tl.arange(0, BLOCK)
        mask = (rows < length)[:, None] & (cols < N)[None, :]
        x = tl.load(v_ptr + page * s_vp + (rows % PAGE)[:, None] * s_vs + cols[None, :],
                    mask=mask, other=0.0)
        tl.atomic_max(out_ptr + seg, tl.max(tl.max(tl.abs(x.to(tl.float32)), axis=1), axis=0))


def prefix_amax(v_cache: torch.Tensor, block_table: torch.Tensor, prefix_lens: torch.Tensor,
                max_prefix_len: int) -> torch.Tensor:
    """[S] float32: the max |v| over each segment's prefix rows in the arena (0 for none), the
    bound an fp8 output scale of a row over that prefix starts from (varlen_attention.
    causal_amax's `start`): the same bound as when the row is computed in one pass, so the
    two routes quantize alike. A bf16 or fp16 arena (not e4m3: its values need scales)."""
    check_tensor("v_cache", v_cache, 4)
    if v_cache.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"prefix_amax reads a bf16, fp16 or fp32 arena, not {v_cache.dtype}")
    if v_cache.stride(2) != v_cache.shape[3]:
        raise ValueError(f"the arena's heads must be contiguous per slot, strides "
                         f"{v_cache.stride()}")
    num_segs, page = block_table.shape[0], v_cache.shape[1]
    out = torch.zeros(num_segs, device=v_cache.device, dtype=torch.float32)
    rows = min(16, page)
    if page % rows:
        raise ValueError(f"page size {page} is not a multiple of {rows}")
    width = v_cache.shape[2] * v_cache.shape[3]
    if num_segs and max_prefix_len:
        _prefix_amax_kernel[(num_segs, triton.cdiv(max_prefix_len, rows))](
            v_cache, block_table, prefix_lens, out, v_cache.stride(0), v_cache.stride(1),
            block_table.stride(0), N=width, BLOCK=triton.next_power_of_2(width), PAGE=page,
            ROWS=rows, num_warps=4)
    return out


def gather_prefix(cache: torch.Tensor, pages: torch.Tensor, length: int,
                  scale: torch.Tensor | None = None) -> torch.Tensor:
    """[P, PAGE, Hkv, D] arena + page ids -> the prefix's [length, Hkv, D] rows (an e4m3
    arena's dequantized with its `scale` [P, Hkv, PAGE], in float32)."""
    if scale is None:
        return cache[pages.long()].flatten(0, 1)[:length]
    index = pages.long()
    rows = cache.view(torch.uint8)[index].view(KV_FP8).flatten(0, 1)[:length]
    return dequantize_kv(rows, scales_by_token(scale[index]).flatten(0, 1)[:length])


def prefix_attention_ref(q, k_cache, v_cache, cu_seqlens_q, block_table, prefix_lens,
                         max_seqlen_q, scale, blocks=None, window=None, positions=None,
                         max_prefix_len=0, k_scale=None, v_scale=None):
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], float("-inf"), device=q.device, dtype=torch.float32)
    bounds = cu_seqlens_q.tolist()
    for seg, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
        length = int(prefix_lens[seg])
        if end > start and length > 0:
            k = gather_prefix(k_cache, block_table[seg], length, k_scale)
            v = gather_prefix(v_cache, block_table[seg], length, v_scale)
            allowed = torch.ones(end - start, length, dtype=torch.bool, device=q.device)
            if window is not None:
                diff = positions[start:end, None] - torch.arange(length, device=q.device)
                allowed = diff < window
            out[start:end], lse[start:end] = attend_ref(q[start:end], k, v, allowed, scale)
    return out, lse
