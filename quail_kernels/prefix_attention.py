"""Suffix-over-resident-prefix attention: the queries of many partner suffixes against one
anchor's KV held in the paged arena (every prefix key visible), returning the log-sum-exp.

q [T, Hq, D] (packed suffix tokens; unit last stride); k_cache/v_cache [P, PAGE, Hkv, D]
arena pages; cu_seqlens_q [S+1] int32 splits q into S segments, each segment all the suffix
tokens that share one prefix; block_table [S, max_pages] int32 page ids of each segment's
prefix; prefix_lens [S] int32 (0: no prefix -> out 0, lse -inf). Returns out [T, Hq, D] and
lse [T, Hq] float32, to be merged (lse_merge) with the suffix's own causal attention.

Kernel: grid (cdiv(max_seqlen_q * G, BLOCK_M), S, Hkv); GQA rows as in attention_tile; key
tiles of BLOCK_N tokens inside one page (PAGE % BLOCK_N == 0), mask only past prefix_len.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from quail_kernels.attention_tile import LOG2E, default_blocks, finish, gqa_rows, softmax_step
from quail_kernels.checks import check_tensor
from quail_kernels.varlen_attention import _check_qkv, attend_ref


@triton.jit
def _prefix_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, cu_ptr, bt_ptr, plen_ptr,
                             pos_ptr, window,
                             qk_scale, s_qt, s_qh, s_kp, s_ks, s_kh, s_vp, s_vs, s_vh,
                             s_ot, s_oh, s_lt, s_bt,
                             G: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             HAS_WINDOW: tl.constexpr):
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
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        full_end = prefix_len // BLOCK_N * BLOCK_N
        if HAS_WINDOW:  # every tile masked by the query's absolute position
            full_end = prefix_len * 0  # (zeros of the same type: the loops below do nothing)
            qpos = tl.load(pos_ptr + tok64, mask=row_ok, other=0)
            for n0 in range(0, prefix_len, BLOCK_N):
                page = tl.load(bt_ptr + seg * s_bt + n0 // PAGE).to(tl.int64)
                slot = n0 % PAGE + tl.arange(0, BLOCK_N)
                cols = n0 + tl.arange(0, BLOCK_N)
                col_ok = cols < prefix_len
                k = tl.load(k_ptr + page * s_kp + slot[None, :] * s_ks + kv_head * s_kh
                            + d[:, None], mask=col_ok[None, :], other=0.0)
                v = tl.load(v_ptr + page * s_vp + slot[:, None] * s_vs + kv_head * s_vh
                            + d[None, :], mask=col_ok[:, None], other=0.0)
                allowed = col_ok[None, :] & (qpos[:, None] - cols[None, :] < window)
                m_i, l_i, acc = softmax_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, True)
            prefix_len = prefix_len * 0
        for n0 in range(0, full_end, BLOCK_N):  # whole tiles: no mask
            page = tl.load(bt_ptr + seg * s_bt + n0 // PAGE).to(tl.int64)
            slot = n0 % PAGE + tl.arange(0, BLOCK_N)
            k = tl.load(k_ptr + page * s_kp + slot[None, :] * s_ks + kv_head * s_kh + d[:, None])
            v = tl.load(v_ptr + page * s_vp + slot[:, None] * s_vs + kv_head * s_vh + d[None, :])
            m_i, l_i, acc = softmax_step(q, k, v, None, m_i, l_i, acc, qk_scale, False)
        if full_end < prefix_len:  # the partial last tile
            page = tl.load(bt_ptr + seg * s_bt + full_end // PAGE).to(tl.int64)
            slot = full_end % PAGE + tl.arange(0, BLOCK_N)
            col_ok = full_end + tl.arange(0, BLOCK_N) < prefix_len
            k = tl.load(k_ptr + page * s_kp + slot[None, :] * s_ks + kv_head * s_kh + d[:, None],
                        mask=col_ok[None, :], other=0.0)
            v = tl.load(v_ptr + page * s_vp + slot[:, None] * s_vs + kv_head * s_vh + d[None, :],
                        mask=col_ok[:, None], other=0.0)
            m_i, l_i, acc = softmax_step(q, k, v, col_ok[None, :], m_i, l_i, acc, qk_scale, True)
        out, lse = finish(m_i, l_i, acc)
        tl.store(o_ptr + tok64[:, None] * s_ot + head[:, None] * s_oh + d[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
        tl.store(lse_ptr + tok64 * s_lt + head, lse, mask=row_ok)


def _check_arena(q, k_cache, v_cache, cu_seqlens_q, block_table, prefix_lens):
    check_tensor("k_cache", k_cache, 4)
    check_tensor("v_cache", v_cache, 4)
    _check_qkv(q, k_cache[0], v_cache[0])
    check_tensor("cu_seqlens_q", cu_seqlens_q, 1, dtypes=(torch.int32,))
    check_tensor("block_table", block_table, 2, dtypes=(torch.int32,))
    check_tensor("prefix_lens", prefix_lens, 1, dtypes=(torch.int32,))
    num_segs = cu_seqlens_q.shape[0] - 1
    if block_table.shape[0] != num_segs or prefix_lens.shape[0] != num_segs:
        raise ValueError(f"{num_segs} segments but block_table {tuple(block_table.shape)} "
                         f"and prefix_lens {tuple(prefix_lens.shape)}")


def prefix_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     cu_seqlens_q: torch.Tensor, block_table: torch.Tensor,
                     prefix_lens: torch.Tensor, max_seqlen_q: int, scale: float,
                     blocks: tuple[int, int, int, int] | None = None,
                     window: int | None = None, positions: torch.Tensor | None = None,
                     max_prefix_len: int = 0):
    """`window` with `positions` [T] (each query's absolute position; prefix keys sit at 0..):
    a query at p sees prefix key j only when p - j < window (Gemma's sliding layers).
    `max_prefix_len`: the longest of prefix_lens if the caller knows it (the tile shape;
    0: the long-prefix tiles)."""
    _check_arena(q, k_cache, v_cache, cu_seqlens_q, block_table, prefix_lens)
    if window is not None and (window < 1 or positions is None
                               or positions.shape != (q.shape[0],)):
        raise ValueError("a sliding window needs window >= 1 and one position per query token")
    num_tokens, num_heads, head_dim = q.shape
    page = k_cache.shape[1]
    group = num_heads // k_cache.shape[2]
    out = torch.empty_like(q)
    lse = torch.empty((num_tokens, num_heads), device=q.device, dtype=torch.float32)
    num_segs = cu_seqlens_q.shape[0] - 1
    if num_tokens == 0 or num_segs == 0:
        return out, lse
    block_m, block_n, warps, stages = blocks or default_blocks(q.device.type, head_dim,
                                                                 max_prefix_len, prefix=True)
    block_n = min(block_n, page)
    if page % block_n:
        raise ValueError(f"page size {page} is not a multiple of BLOCK_N {block_n}")
    grid = (triton.cdiv(max_seqlen_q, block_m // group), num_segs, k_cache.shape[2])
    _prefix_attention_kernel[grid](
        q, k_cache, v_cache, out, lse, cu_seqlens_q, block_table, prefix_lens,
        positions if window is not None else prefix_lens, window or 0, scale * LOG2E,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        out.stride(0), out.stride(1), lse.stride(0), block_table.stride(0),
        G=group, D=head_dim, PAGE=page, BLOCK_M=block_m, BLOCK_N=block_n,
        HAS_WINDOW=window is not None, num_warps=warps, num_stages=stages)
    return out, lse


def gather_prefix(cache: torch.Tensor, pages: torch.Tensor, length: int) -> torch.Tensor:
    """[P, PAGE, Hkv, D] arena + page ids -> the prefix's [length, Hkv, D] rows."""
    return cache[pages.long()].flatten(0, 1)[:length]


def prefix_attention_ref(q, k_cache, v_cache, cu_seqlens_q, block_table, prefix_lens,
                         max_seqlen_q, scale, blocks=None, window=None, positions=None):
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], float("-inf"), device=q.device, dtype=torch.float32)
    bounds = cu_seqlens_q.tolist()
    for seg, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
        length = int(prefix_lens[seg])
        if end > start and length > 0:
            k = gather_prefix(k_cache, block_table[seg], length)
            v = gather_prefix(v_cache, block_table[seg], length)
            allowed = torch.ones(end - start, length, dtype=torch.bool, device=q.device)
            if window is not None:
                diff = positions[start:end, None] - torch.arange(length, device=q.device)
                allowed = diff < window
            out[start:end], lse[start:end] = attend_ref(q[start:end], k, v, allowed, scale)
    return out, lse
