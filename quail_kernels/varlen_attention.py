"""Causal attention over packed variable-length sequences, returning the log-sum-exp.

q [T, Hq, D], k/v [T, Hkv, D] (any token/head strides, unit last stride); cu_seqlens [B+1]
int32 offsets. Returns out [T, Hq, D] (q's dtype) and lse [T, Hq] float32 (natural log of the
sum of exp(scaled score) over the keys each query saw). `seqs` (int32 sequence indices): only
those sequences are computed, the other rows of out/lse are left unwritten (another kernel
takes them: the GPU path's long sequences go to cuDNN). `window` (Gemma's sliding layers): a
query at i sees keys j with 0 <= i - j < window. `varlen_attention_fp8` writes out in e4m3 with
one scale per token instead (the O projection's fp8 input, no separate quantize pass).

Kernel: grid (cdiv(max_seqlen * G, BLOCK_M), B, Hkv); rows packed as in attention_tile.gqa_rows;
keys 0..last query token of the tile, causal mask per row. Tiles run last first (a causal tile's
work grows with its position: the longest ones start first and the short ones fill the end).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from quail_kernels.attention_tile import LOG2E, default_blocks, finish, gqa_rows, softmax_step
from quail_kernels.checks import check_power_of_two, check_tensor


@triton.jit
def _varlen_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, cu_ptr, seqs_ptr, qk_scale,
                             window, s_qt, s_qh, s_kt, s_kh, s_vt, s_vh, s_ot, s_oh, s_lt,
                             amax_ptr, scale_ptr,
                             G: tl.constexpr, D: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             HAS_WINDOW: tl.constexpr, OUT_FP8: tl.constexpr,
                             HAS_SEQS: tl.constexpr, LAST_FIRST: tl.constexpr):
    tile = tl.program_id(0)
    if LAST_FIRST:
        tile = tl.num_programs(0) - 1 - tile
    seq = tl.program_id(1)
    if HAS_SEQS:
        seq = tl.load(seqs_ptr + seq)
    kv_head = tl.program_id(2)
    start = tl.load(cu_ptr + seq)
    seqlen = tl.load(cu_ptr + seq + 1) - start
    tok_per_tile: tl.constexpr = BLOCK_M // G
    if tile * tok_per_tile < seqlen:
        tok, head, valid = gqa_rows(tile, kv_head, G, BLOCK_M)
        row_ok = valid & (tok < seqlen)
        d = tl.arange(0, D)
        tok64 = (start + tok).to(tl.int64)
        q = tl.load(q_ptr + tok64[:, None] * s_qt + head[:, None] * s_qh + d[None, :],
                    mask=row_ok[:, None], other=0.0)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        first_tok = tile * tok_per_tile
        hi = tl.minimum(first_tok + tok_per_tile, seqlen)
        full_end = first_tok // BLOCK_N * BLOCK_N  # keys every row of the tile sees
        masked_start = full_end
        if HAS_WINDOW:  # every tile masked, none before the oldest key the tile's rows can see
            full_end = first_tok * 0  # (a zero of the same type: no unmasked tiles)
            masked_start = tl.maximum(first_tok - window + 1, 0) // BLOCK_N * BLOCK_N
        for n0 in range(0, full_end, BLOCK_N):
            col64 = (start + n0 + tl.arange(0, BLOCK_N)).to(tl.int64)
            k = tl.load(k_ptr + col64[None, :] * s_kt + kv_head * s_kh + d[:, None])
            v = tl.load(v_ptr + col64[:, None] * s_vt + kv_head * s_vh + d[None, :])
            m_i, l_i, acc = softmax_step(q, k, v, None, m_i, l_i, acc, qk_scale, False)
        for n0 in range(masked_start, hi, BLOCK_N):  # the diagonal (or windowed) tiles
            cols = n0 + tl.arange(0, BLOCK_N)
            col_ok = cols < seqlen
            col64 = (start + cols).to(tl.int64)
            k = tl.load(k_ptr + col64[None, :] * s_kt + kv_head * s_kh + d[:, None],
                        mask=col_ok[None, :], other=0.0)
            v = tl.load(v_ptr + col64[:, None] * s_vt + kv_head * s_vh + d[None, :],
                        mask=col_ok[:, None], other=0.0)
            allowed = (cols[None, :] <= tok[:, None]) & col_ok[None, :]
            if HAS_WINDOW:
                allowed = allowed & (tok[:, None] - cols[None, :] < window)
            m_i, l_i, acc = softmax_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, True)
        out, lse = finish(m_i, l_i, acc)
        if OUT_FP8:  # a row is a convex mix of the V rows it sees: |out| <= its bound
            row_scale = tl.maximum(tl.load(amax_ptr + start + tok, mask=row_ok, other=1.0),
                                   1e-6) / 448.0
            out = tl.clamp(out / row_scale[:, None], -448.0, 448.0)
            tl.store(scale_ptr + start + tok, row_scale, mask=row_ok)
        tl.store(o_ptr + tok64[:, None] * s_ot + head[:, None] * s_oh + d[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
        tl.store(lse_ptr + tok64 * s_lt + head, lse, mask=row_ok)


@triton.jit
def _row_amax_kernel(x_ptr, out_ptr, T, s_xt, N: tl.constexpr, BLOCK: tl.constexpr,
                     ROWS: tl.constexpr):
    """out[t] = max |x[t]| over the token's N values, for ROWS tokens a program."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < T)[:, None] & (cols < N)[None, :]
    x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * s_xt + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rows, tl.max(tl.abs(x.to(tl.float32)), axis=1), mask=rows < T)


@triton.jit
def _max2(a, b):
    return tl.maximum(a, b)


@triton.jit
def _running_max_kernel(x_ptr, cu_ptr, start_ptr, out_ptr, HAS_START: tl.constexpr,
                        BLOCK: tl.constexpr):
    """out[t] = max(start[seq], x over the sequence's rows up to t): one program a sequence,
    BLOCK rows a step (a sequence's row maxima are floats, so even a long one is few steps)."""
    seq = tl.program_id(0)
    first = tl.load(cu_ptr + seq)
    end = tl.load(cu_ptr + seq + 1)
    carry = tl.load(start_ptr + seq) if HAS_START else 0.0
    for r0 in range(first, end, BLOCK):
        rows = r0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + rows, mask=rows < end, other=0.0)
        run = tl.maximum(tl.associative_scan(x, 0, _max2), carry)
        tl.store(out_ptr + rows, run, mask=rows < end)
        carry = tl.max(run, axis=0)


def causal_amax(x: torch.Tensor, cu_seqlens: torch.Tensor,
                start: torch.Tensor | None = None) -> torch.Tensor:
    """x [T, H, D] (each token's H x D values contiguous) -> [T] float32: each row's max |x|
    over its sequence's rows up to and including it, at least `start` [B] float32 (the max
    over keys before the sequence's first row: a cached prefix's). An attention output row is
    a convex mix of the V rows it sees, all of them among these, so this bounds it; and it
    reads nothing after the row, so a row's bound is the same wherever its sequence is split
    into a cached prefix and fresh rows (a whole prompt in one pass, a document stored as a
    prefix and a question after it, a join partner's tokens over its anchor)."""
    check_tensor("x", x, 3)
    if x.stride(1) != x.shape[2]:
        raise ValueError(f"x's heads must be contiguous per token, strides {x.stride()}")
    num_seqs, num_tokens = cu_seqlens.shape[0] - 1, x.shape[0]
    if start is not None and (start.shape != (num_seqs,) or start.dtype != torch.float32):
        raise ValueError(f"start is one float32 per sequence ({num_seqs}); got "
                         f"{tuple(start.shape)} {start.dtype}")
    rows = torch.empty(num_tokens, device=x.device, dtype=torch.float32)
    out = torch.empty_like(rows)
    if num_tokens == 0 or num_seqs == 0:
        return out
    width, per = x.shape[1] * x.shape[2], 16
    _row_amax_kernel[(triton.cdiv(num_tokens, per),)](
        x, rows, num_tokens, x.stride(0), N=width, BLOCK=triton.next_power_of_2(width),
        ROWS=per, num_warps=4)
    _running_max_kernel[(num_seqs,)](rows, cu_seqlens, start if start is not None else rows,
                                     out, HAS_START=start is not None, BLOCK=1024, num_warps=4)
    return out


def causal_amax_ref(x: torch.Tensor, cu_seqlens: torch.Tensor,
                    start: torch.Tensor | None = None) -> torch.Tensor:
    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    bounds = cu_seqlens.tolist()
    for s, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        if b > a:
            run = x[a:b].float().abs().flatten(1).amax(dim=1).cummax(dim=0).values
            out[a:b] = run if start is None else torch.maximum(run, start[s])
    return out


def _check_qkv(q, k, v):
    check_tensor("q", q, 3)
    check_tensor("k", k, 3)
    check_tensor("v", v, 3)
    if q.shape[-1] != k.shape[-1] or k.shape != v.shape:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} disagree")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"{q.shape[1]} query heads not a multiple of {k.shape[1]} KV heads")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"dtypes differ: q {q.dtype}, k {k.dtype}, v {v.dtype}")
    check_power_of_two("head_dim", q.shape[-1])


def varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     cu_seqlens: torch.Tensor, max_seqlen: int, scale: float,
                     blocks: tuple[int, int, int, int] | None = None,
                     window: int | None = None, seqs: torch.Tensor | None = None,
                     last_first: bool = True, out_dtype: torch.dtype | None = None):
    """`seqs`: compute only these sequences (`max_seqlen`: the longest of them).
    `last_first=False`: tiles in launch order (the probe's comparison). `out_dtype`: the
    output's dtype (q's unless given; float32 for a partial an LSE merge reads)."""
    return _launch(q, k, v, cu_seqlens, max_seqlen, scale, blocks, window, fp8=False,
                   seqs=seqs, last_first=last_first, out_dtype=out_dtype)[:2]


def varlen_attention_fp8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         cu_seqlens: torch.Tensor, max_seqlen: int, scale: float,
                         blocks: tuple[int, int, int, int] | None = None,
                         window: int | None = None):
    """The O projection's fp8 input straight from the attention: -> (out [T, Hq, D] e4m3,
    lse [T, Hq], scale [T, 1] float32). A token's scale is its causal_amax of v / 448 (the max
    |v| over its sequence up to it): an output row is a convex combination of those V rows, so
    it never overflows, and e4m3's exponent keeps a row up to 2^6 below that bound at full
    mantissa precision. Saves the separate quantize pass (read bf16 out, write fp8) of
    lse_merge."""
    return _launch(q, k, v, cu_seqlens, max_seqlen, scale, blocks, window, fp8=True)


def varlen_attention_grouped(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             cu_seqlens: torch.Tensor, max_seqlen: int,
                             groups: list[tuple[torch.Tensor, int]], scale: float,
                             fp8: bool = False, window: int | None = None,
                             out_dtype: torch.dtype | None = None):
    """One launch per group (int32 sequence indices, the longest of them), each with the blocks
    of its own longest sequence, into shared outputs: a pass of 300-token documents with a few
    of 1,500 tokens does not run every document with the long sequences' tiles. -> (out, lse,
    scale [T, 1] or None); rows of sequences in no group are left unwritten (fp8: the groups
    must cover every sequence, as its scales come from causal_amax over all of them). `out_dtype`:
    as varlen_attention's (without fp8)."""
    _check_qkv(q, k, v)
    out = torch.empty(q.shape, device=q.device,
                      dtype=torch.float8_e4m3fn if fp8 else out_dtype or q.dtype)
    lse = torch.empty(q.shape[:2], device=q.device, dtype=torch.float32)
    scales = torch.empty((q.shape[0], 1), device=q.device, dtype=torch.float32) if fp8 else None
    amax = causal_amax(v, cu_seqlens) if fp8 and q.shape[0] else None
    for seqs, longest in groups:
        _launch(q, k, v, cu_seqlens, longest, scale, None, window, fp8=fp8, seqs=seqs,
                into=(out, lse, scales if fp8 else lse, amax if fp8 else lse))
    return out, lse, scales


def _launch(q, k, v, cu_seqlens, max_seqlen, scale, blocks, window, fp8: bool,
            seqs: torch.Tensor | None = None, last_first: bool = True, into=None,
            out_dtype: torch.dtype | None = None):
    """`into`: (out, lse, scales, amax) to write into instead of new tensors (the grouped
    launches; without fp8, lse stands in for scales and amax)."""
    _check_qkv(q, k, v)
    if window is not None and window < 1:
        raise ValueError(f"sliding window must be >= 1, got {window}")
    if k.shape[0] != q.shape[0]:
        raise ValueError(f"k has {k.shape[0]} tokens, q has {q.shape[0]}")
    check_tensor("cu_seqlens", cu_seqlens, 1, dtypes=(torch.int32,))
    num_tokens, num_heads, head_dim = q.shape
    group = num_heads // k.shape[1]
    if into is not None:
        out, lse, scales, amax = into
    else:
        out = torch.empty(q.shape, device=q.device,
                          dtype=torch.float8_e4m3fn if fp8 else out_dtype or q.dtype)
        lse = torch.empty((num_tokens, num_heads), device=q.device, dtype=torch.float32)
        # without fp8 the kernel never touches amax/scales: lse stands in for both pointers
        scales = torch.empty((num_tokens, 1), device=q.device, dtype=torch.float32) \
            if fp8 else lse
        amax = None
    num_seqs = cu_seqlens.shape[0] - 1
    if seqs is not None:
        check_tensor("seqs", seqs, 1, dtypes=(torch.int32,))
        if fp8 and into is None:
            raise ValueError("the fp8 output of a subset of sequences needs every sequence's "
                             "max |v| (varlen_attention_grouped)")
        num_seqs = seqs.shape[0]
    if num_tokens == 0 or num_seqs == 0:
        return out, lse, scales
    if amax is None:
        amax = causal_amax(v, cu_seqlens) if fp8 else lse
    block_m, block_n, warps, stages = blocks or default_blocks(q.device.type, head_dim,
                                                                 max_seqlen)
    if block_m < group:
        raise ValueError(f"BLOCK_M {block_m} smaller than the GQA group {group}")
    grid = (triton.cdiv(max_seqlen, block_m // group), num_seqs, k.shape[1])
    _varlen_attention_kernel[grid](
        q, k, v, out, lse, cu_seqlens, seqs if seqs is not None else cu_seqlens,
        scale * LOG2E, window or 0,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        out.stride(0), out.stride(1), lse.stride(0), amax, scales,
        G=group, D=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, HAS_WINDOW=window is not None,
        OUT_FP8=fp8, HAS_SEQS=seqs is not None, LAST_FIRST=last_first, num_warps=warps,
        num_stages=stages)
    return out, lse, scales


def attend_ref(q, k, v, allowed, scale):
    """q [M, Hq, D], k/v [N, Hkv, D], allowed [M, N] -> (out [M, Hq, D], lse [M, Hq]) in fp32."""
    group = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    s = torch.einsum("mhd,nhd->hmn", q.float(), kf) * scale
    s = s.masked_fill(~allowed[None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.nan_to_num(torch.exp(s - lse[..., None]), nan=0.0)
    out = torch.einsum("hmn,nhd->mhd", p, vf)
    return out.to(q.dtype), lse.transpose(0, 1).contiguous()


def varlen_attention_fp8_ref(q, k, v, cu_seqlens, max_seqlen, scale, blocks=None, window=None):
    out, lse = varlen_attention_ref(q, k, v, cu_seqlens, max_seqlen, scale, window=window)
    scales = (causal_amax_ref(v, cu_seqlens).clamp_min(1e-6) / 448.0)[:, None]
    q8 = (out.float() / scales[:, :, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q8, lse, scales


def varlen_attention_ref(q, k, v, cu_seqlens, max_seqlen, scale, blocks=None, window=None):
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:2], device=q.device, dtype=torch.float32)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        if end > start:
            idx = torch.arange(end - start, device=q.device)
            allowed = idx[None, :] <= idx[:, None]
            if window is not None:
                allowed = allowed & (idx[:, None] - idx[None, :] < window)
            out[start:end], lse[start:end] = attend_ref(q[start:end], k[start:end],
                                                        v[start:end], allowed, scale)
    return out, lse
