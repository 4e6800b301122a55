"""Exact merge of two attention partials over disjoint key sets by their log-sum-exps,
optionally fused with per-token fp8 quantization of the result (the O-projection's input).

o1, o2 [T, Hq, D]; lse1, lse2 [T, Hq] float32 (either may be -inf: no keys). o2/lse2 None
means "no second partial": the kernel then only flattens (and quantizes) o1.
Returns out [T, Hq * D] (o1's dtype, or float8_e4m3fn with scale [T, 1] float32).

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
def _lse_merge_kernel(o1_ptr, l1_ptr, o2_ptr, l2_ptr, out_ptr, scale_ptr,
                      s_o1t, s_o1h, s_l1t, s_o2t, s_o2h, s_l2t, s_out,
                      H: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr,
                      HAS_SECOND: tl.constexpr, IS_FP8: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64)
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, D)
    hmask = h < H
    o = tl.load(o1_ptr + tok * s_o1t + h[:, None] * s_o1h + d[None, :],
                mask=hmask[:, None], other=0.0).to(tl.float32)
    if HAS_SECOND:
        l1 = tl.load(l1_ptr + tok * s_l1t + h, mask=hmask, other=0.0)
        l2 = tl.load(l2_ptr + tok * s_l2t + h, mask=hmask, other=0.0)
        o2 = tl.load(o2_ptr + tok * s_o2t + h[:, None] * s_o2h + d[None, :],
                     mask=hmask[:, None], other=0.0).to(tl.float32)
        m = tl.maximum(l1, l2)
        m = tl.where(m == float("-inf"), 0.0, m)
        w1 = tl.exp(l1 - m)
        w2 = tl.exp(l2 - m)
        denom = tl.where(w1 + w2 == 0.0, 1.0, w1 + w2)
        o = (o * w1[:, None] + o2 * w2[:, None]) / denom[:, None]
    if IS_FP8:
        amax = tl.maximum(tl.max(tl.max(tl.abs(o), axis=1), axis=0), 1e-6)
        scale = amax / 448.0
        o = tl.clamp(o / scale, -448.0, 448.0)
        tl.store(scale_ptr + tok, scale)
    tl.store(out_ptr + tok * s_out + h[:, None] * D + d[None, :],
             o.to(out_ptr.dtype.element_ty), mask=hmask[:, None])


def lse_merge(o1: torch.Tensor, lse1: torch.Tensor, o2: torch.Tensor | None = None,
              lse2: torch.Tensor | None = None, fp8: bool = False):
    """-> (out [T, Hq * D], scale [T, 1] or None)."""
    check_tensor("o1", o1, 3)
    check_tensor("lse1", lse1, 2, dtypes=(torch.float32,))
    check_power_of_two("head_dim", o1.shape[-1])
    if (o2 is None) != (lse2 is None):
        raise ValueError("o2 and lse2 must both be given or both be None")
    if o2 is not None:
        check_tensor("o2", o2, 3)
        check_tensor("lse2", lse2, 2, dtypes=(torch.float32,))
        if o2.shape != o1.shape or lse2.shape != lse1.shape:
            raise ValueError(f"partials disagree: {tuple(o1.shape)} vs {tuple(o2.shape)}")
    num_tokens, num_heads, head_dim = o1.shape
    out = torch.empty((num_tokens, num_heads * head_dim), device=o1.device,
                      dtype=torch.float8_e4m3fn if fp8 else o1.dtype)
    scale = torch.empty((num_tokens, 1), device=o1.device, dtype=torch.float32) if fp8 else out
    if num_tokens:
        second = o2 is not None
        o2_, l2_ = (o2, lse2) if second else (o1, lse1)
        _lse_merge_kernel[(num_tokens,)](
            o1, lse1, o2_, l2_, out, scale, o1.stride(0), o1.stride(1), lse1.stride(0),
            o2_.stride(0), o2_.stride(1), l2_.stride(0), out.stride(0),
            H=num_heads, D=head_dim, BLOCK_H=triton.next_power_of_2(num_heads),
            HAS_SECOND=second, IS_FP8=fp8, num_warps=4)
    return out, (scale if fp8 else None)


def lse_merge_ref(o1, lse1, o2=None, lse2=None, fp8: bool = False):
    o = o1.float()
    if o2 is not None:
        m = torch.maximum(lse1, lse2)
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        w1, w2 = torch.exp(lse1 - m)[..., None], torch.exp(lse2 - m)[..., None]
        denom = w1 + w2
        o = (o * w1 + o2.float() * w2) / torch.where(denom == 0, torch.ones_like(denom), denom)
    o = o.flatten(1)
    if not fp8:
        return o.to(o1.dtype), None
    scale = o.abs().amax(-1, keepdim=True).clamp_min(1e-6) / FP8_MAX
    return (o / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale
