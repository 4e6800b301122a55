"""Exact merge of two attention partials over disjoint key sets by their log-sum-exps,
optionally fused with per-token fp8 quantization of the result (the O-projection's input).

o1, o2 (, o3) [T, Hq, D]; lse1, lse2 (, lse3) [T, Hq] float32 (any may be -inf: no keys);
strided views are fine (e.g. cuDNN's [1, Hq, T, 1] LSE seen as [T, Hq]). o2/lse2 None means
"no second partial": the kernel then only flattens (and quantizes) o1.
Returns out [T, Hq * D] (o1's dtype unless `dtype` says, or float8_e4m3fn with scale [T, 1]
float32). The fp8 scale is a token's own max |out| / 448, or, given `bound` [T], that bound /
448: the bound the one-pass kernel uses (the max |v| over its sequence up to the row;
varlen_attention.causal_amax), so a row merged from parts is quantized as the same row
computed in one pass is.

Kernel: grid (T,), one program per token over a [BLOCK_H, D] tile of all its heads, so the
per-token fp8 amax needs no second pass.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from quail_kernels import FP8_MAX
from quail_kernels.checks import check_power_of_two, check_tensor


@triton.jit
def _lse_merge_kernel(o1_ptr, l1_ptr, o2_ptr, l2_ptr, o3_ptr, l3_ptr, out_ptr, scale_ptr,
                      bound_ptr, s_o1t, s_o1h, s_l1t, s_l1h, s_o2t, s_o2h, s_l2t, s_l2h,
                      s_o3t, s_o3h, s_l3t, s_l3h, s_out,
                      H: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr,
                      PARTS: tl.constexpr, IS_FP8: tl.constexpr, HAS_BOUND: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64)
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, D)
    hmask = h < H
    o = tl.load(o1_ptr + tok * s_o1t + h[:, None] * s_o1h + d[None, :],
                mask=hmask[:, None], other=0.0).to(tl.float32)
    if PARTS > 1:
        l1 = tl.load(l1_ptr + tok * s_l1t + h * s_l1h, mask=hmask, other=0.0)
        l2 = tl.load(l2_ptr + tok * s_l2t + h * s_l2h, mask=hmask, other=0.0)
        o2 = tl.load(o2_ptr + tok * s_o2t + h[:, None] * s_o2h + d[None, :],
                     mask=hmask[:, None], other=0.0).to(tl.float32)
        m = tl.maximum(l1, l2)
        if PARTS > 2:
            l3 = tl.load(l3_ptr + tok * s_l3t + h * s_l3h, mask=hmask, other=0.0)
            m = tl.maximum(m, l3)
        m = tl.where(m == float("-inf"), 0.0, m)
        w1 = tl.exp(l1 - m)
        w2 = tl.exp(l2 - m)
        o = o * w1[:, None] + o2 * w2[:, None]
        denom = w1 + w2
        if PARTS > 2:
            o3 = tl.load(o3_ptr + tok * s_o3t + h[:, None] * s_o3h + d[None, :],
                         mask=hmask[:, None], other=0.0).to(tl.float32)
            w3 = tl.exp(l3 - m)
            o = o + o3 * w3[:, None]
            denom = denom + w3
        denom = tl.where(denom == 0.0, 1.0, denom)
        o = o / denom[:, None]
    if IS_FP8:
        if HAS_BOUND:  # as varlen_attention's epilogue computes it
            scale = tl.maximum(tl.load(bound_ptr + tok), 1e-6) / 448.0
        else:
            scale = tl.maximum(tl.max(tl.max(tl.abs(o), axis=1), axis=0), 1e-6) / 448.0
        o = tl.clamp(o / scale, -448.0, 448.0)
        tl.store(scale_ptr + tok, scale)
    tl.store(out_ptr + tok * s_out + h[:, None] * D + d[None, :],
             o.to(out_ptr.dtype.element_ty), mask=hmask[:, None])


def _check_partial(name: str, o: torch.Tensor, lse: torch.Tensor, like: torch.Tensor) -> None:
    check_tensor(f"o{name}", o, 3)
    check_tensor(f"lse{name}", lse, 2, dtypes=(torch.float32,), last_contiguous=False)
    if o.shape != like.shape or lse.shape != like.shape[:2]:
        raise ValueError(f"partial {name} disagrees: o {tuple(o.shape)}, lse {tuple(lse.shape)} "
                         f"vs o1 {tuple(like.shape)}")


def lse_merge(o1: torch.Tensor, lse1: torch.Tensor, o2: torch.Tensor | None = None,
              lse2: torch.Tensor | None = None, fp8: bool = False,
              third: tuple[torch.Tensor, torch.Tensor] | None = None,
              out: tuple[torch.Tensor, torch.Tensor | None] | None = None,
              bound: torch.Tensor | None = None, dtype: torch.dtype | None = None):
    """-> (out [T, Hq * D], scale [T, 1] or None). `third`: a third partial (o3, lse3).
    o's and lse's may be strided views (unit last stride for o). `out`: (rows [T, Hq * D],
    scale rows [T, 1] when fp8) to write into, e.g. a slice of a whole pass's buffer.
    `bound` [T] float32 (fp8 only): each token's max |v| bound for its scale (module doc).
    `dtype`: the output's dtype without fp8 (o1's unless given: float32 partials merge to
    the model's dtype)."""
    check_tensor("o1", o1, 3)
    check_tensor("lse1", lse1, 2, dtypes=(torch.float32,), last_contiguous=False)
    check_power_of_two("head_dim", o1.shape[-1])
    if (o2 is None) != (lse2 is None):
        raise ValueError("o2 and lse2 must both be given or both be None")
    if third is not None and o2 is None:
        raise ValueError("a third partial needs a second one")
    parts = [(o1, lse1)]
    if o2 is not None:
        _check_partial("2", o2, lse2, o1)
        parts.append((o2, lse2))
    if third is not None:
        _check_partial("3", *third, o1)
        parts.append(third)
    num_tokens, num_heads, head_dim = o1.shape
    if bound is not None and (not fp8 or bound.shape != (num_tokens,)
                              or bound.dtype != torch.float32):
        raise ValueError(f"a scale bound is one float32 per token of an fp8 merge; got "
                         f"{tuple(bound.shape)} {bound.dtype} for {num_tokens} tokens, "
                         f"fp8={fp8}")
    dtype = torch.float8_e4m3fn if fp8 else dtype or o1.dtype
    if out is None:
        rows = torch.empty((num_tokens, num_heads * head_dim), device=o1.device, dtype=dtype)
        scale = torch.empty((num_tokens, 1), device=o1.device, dtype=torch.float32) if fp8 \
            else None
    else:
        rows, scale = out
        if rows.shape != (num_tokens, num_heads * head_dim) or rows.dtype != dtype or \
                rows.stride(-1) != 1:
            raise ValueError(f"out rows {tuple(rows.shape)} {rows.dtype} do not fit "
                             f"{num_tokens} tokens x {num_heads * head_dim} as {dtype}")
        if fp8 and (scale is None or scale.shape != (num_tokens, 1) or scale.stride(0) != 1):
            raise ValueError("fp8 output needs a [T, 1] scale buffer with unit stride")
    if num_tokens:
        while len(parts) < 3:
            parts.append(parts[0])  # unused pointers (PARTS says how many are read)
        (a, la), (b, lb), (c, lc) = parts
        _lse_merge_kernel[(num_tokens,)](
            a, la, b, lb, c, lc, rows, scale if fp8 else rows,
            bound if bound is not None else la, a.stride(0), a.stride(1), la.stride(0), la.stride(1),
            b.stride(0), b.stride(1), lb.stride(0), lb.stride(1),
            c.stride(0), c.stride(1), lc.stride(0), lc.stride(1), rows.stride(0),
            H=num_heads, D=head_dim, BLOCK_H=triton.next_power_of_2(num_heads),
            PARTS=1 + (o2 is not None) + (third is not None), IS_FP8=fp8,
            HAS_BOUND=bound is not None, num_warps=4)
    return rows, (scale if fp8 else None)


def lse_merge_ref(o1, lse1, o2=None, lse2=None, fp8: bool = False, third=None, bound=None,
                  dtype=None):
    parts = [(o1, lse1)] + ([(o2, lse2)] if o2 is not None else []) + \
        ([third] if third is not None else [])
    if len(parts) == 1:
        o = o1.float()
    else:
        lses = torch.stack([lse for _, lse in parts])
        m = lses.max(0).values
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        weights = [torch.exp(lse - m)[..., None] for _, lse in parts]
        num = sum(w * o.float() for w, (o, _) in zip(weights, parts))
        denom = sum(weights)
        o = num / torch.where(denom == 0, torch.ones_like(denom), denom)
    o = o.flatten(1)
    if not fp8:
        return o.to(dtype or o1.dtype), None
    amax = o.abs().amax(-1, keepdim=True) if bound is None else bound.float()[:, None]
    scale = amax.clamp_min(1e-6) / FP8_MAX
    return (o / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale
