"""Per-head RMSNorm of q and k (Qwen3's q_norm/k_norm; skipped when the weights are None)
followed by rotary embedding (rotate-half / NeoX layout), in place on the fused qkv output.

qkv [T, (Hq + 2 Hkv) * D] (q heads, then k heads, then v heads; unit last stride); positions [T]
int; cos_sin [max_pos, D] float32 (cos in the first D/2 columns, sin in the last D/2).
Returns views q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D] of qkv (v untouched).

Kernel: grid (T, (Hq + Hkv) / HB): each program rotates HB heads of one token (default HB = Hkv,
so the query heads take Hq / Hkv programs and the key heads one, all the same size), as one
[HB, D/2] tile pair (first and second halves of each head).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from quail_kernels.checks import check_power_of_two, check_tensor


@triton.jit
def _qk_norm_rope_kernel(qkv_ptr, pos_ptr, cs_ptr, qw_ptr, kw_ptr, stride_t, stride_cs, eps,
                         HQ: tl.constexpr, HB: tl.constexpr, HALF: tl.constexpr,
                         BLOCK_H: tl.constexpr, HAS_NORM: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64)
    head0 = tl.program_id(1) * HB  # heads [head0, head0 + HB) of the q heads then the k heads
    heads = tl.arange(0, BLOCK_H)
    offs = tl.arange(0, HALF)
    mask = (heads < HB)[:, None]
    base = qkv_ptr + tok * stride_t + (head0 + heads)[:, None] * (2 * HALF) + offs[None, :]
    x1 = tl.load(base, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(base + HALF, mask=mask, other=0.0).to(tl.float32)
    if HAS_NORM:
        w_ptr = qw_ptr if head0 < HQ else kw_ptr
        w1 = tl.load(w_ptr + offs).to(tl.float32)
        w2 = tl.load(w_ptr + HALF + offs).to(tl.float32)
        var = (tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / (2 * HALF)
        inv = tl.rsqrt(var + eps)[:, None]
        x1 = x1 * inv * w1[None, :]
        x2 = x2 * inv * w2[None, :]
    pos = tl.load(pos_ptr + tok).to(tl.int64)
    cos = tl.load(cs_ptr + pos * stride_cs + offs)[None, :]
    sin = tl.load(cs_ptr + pos * stride_cs + HALF + offs)[None, :]
    y1 = x1 * cos - x2 * sin
    y2 = x2 * cos + x1 * sin
    tl.store(base, y1.to(qkv_ptr.dtype.element_ty), mask=mask)
    tl.store(base + HALF, y2.to(qkv_ptr.dtype.element_ty), mask=mask)


def rope_cos_sin(max_positions: int, head_dim: int, theta: float,
                 device: torch.device | str = "cpu") -> torch.Tensor:
    """[max_positions, head_dim] float32: cos of each rotary angle, then sin."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).float().to(device)


def _split(qkv: torch.Tensor, num_q_heads: int, num_kv_heads: int):
    num_tokens = qkv.shape[0]
    head_dim = qkv.shape[1] // (num_q_heads + 2 * num_kv_heads)
    heads = qkv.view(num_tokens, num_q_heads + 2 * num_kv_heads, head_dim)
    q = heads[:, :num_q_heads]
    k = heads[:, num_q_heads:num_q_heads + num_kv_heads]
    v = heads[:, num_q_heads + num_kv_heads:]
    return q, k, v


def qk_norm_rope(qkv: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor,
                 q_norm: torch.Tensor | None, k_norm: torch.Tensor | None,
                 num_q_heads: int, num_kv_heads: int, eps: float = 1e-6,
                 heads_per_program: int | None = None, num_warps: int | None = None):
    check_tensor("qkv", qkv, 2)
    check_tensor("cos_sin", cos_sin, 2, dtypes=(torch.float32,))
    if qkv.stride(0) != qkv.shape[1]:
        raise ValueError(f"qkv must be contiguous, strides {qkv.stride()}")
    width = num_q_heads + 2 * num_kv_heads
    if qkv.shape[1] % width:
        raise ValueError(f"qkv width {qkv.shape[1]} is not a multiple of {width} heads")
    head_dim = qkv.shape[1] // width
    check_power_of_two("head_dim", head_dim)
    if cos_sin.shape[1] != head_dim:
        raise ValueError(f"cos_sin {tuple(cos_sin.shape)} does not match head_dim {head_dim}")
    if positions.shape != (qkv.shape[0],):
        raise ValueError(f"positions {tuple(positions.shape)} != ({qkv.shape[0]},)")
    if (q_norm is None) != (k_norm is None):
        raise ValueError("q_norm and k_norm must both be given or both be None")
    hb = heads_per_program or num_kv_heads
    if num_q_heads % hb or num_kv_heads % hb:
        raise ValueError(f"heads_per_program {hb} must divide both {num_q_heads} query and "
                         f"{num_kv_heads} key heads")
    if qkv.shape[0]:
        has_norm = q_norm is not None
        _qk_norm_rope_kernel[(qkv.shape[0], (num_q_heads + num_kv_heads) // hb)](
            qkv, positions, cos_sin, q_norm if has_norm else cos_sin,
            k_norm if has_norm else cos_sin, qkv.stride(0), cos_sin.stride(0), eps,
            HQ=num_q_heads, HB=hb, HALF=head_dim // 2,
            BLOCK_H=triton.next_power_of_2(hb), HAS_NORM=has_norm,
            num_warps=num_warps or max(1, min(4, hb * head_dim // 256)))
    return _split(qkv, num_q_heads, num_kv_heads)


def _rotate(x: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor,
            norm: torch.Tensor | None, eps: float) -> torch.Tensor:
    x = x.float()
    if norm is not None:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * norm.float()
    half = x.shape[-1] // 2
    cs = cos_sin[positions.long()][:, None, :]
    cos, sin = cs[..., :half], cs[..., half:]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def qk_norm_rope_ref(qkv: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor,
                     q_norm: torch.Tensor | None, k_norm: torch.Tensor | None,
                     num_q_heads: int, num_kv_heads: int, eps: float = 1e-6):
    q, k, v = _split(qkv, num_q_heads, num_kv_heads)
    q.copy_(_rotate(q, positions, cos_sin, q_norm, eps))
    k.copy_(_rotate(k, positions, cos_sin, k_norm, eps))
    return q, k, v
