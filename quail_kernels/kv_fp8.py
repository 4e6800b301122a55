"""The fp8 KV cache's number format: e4m3 values with one float32 scale per (token, KV head).

A head's D values of one token share scale = amax / 448 (e4m3's largest finite value), so the
largest lands on 448 and the rest keep e4m3's 3-bit mantissa relative to their own magnitude;
a head of zeros gets the smallest normal scale (its values quantize to 0, never 0 / 0). Keys
after RoPE and values differ in range from head to head and token to token far more than
within one head's vector, which a per-tensor or per-page scale would pay for in precision.

x [..., Hkv, D] -> (x8 [..., Hkv, D] float8_e4m3fn, scale [..., Hkv] float32), and back:
dequantize_kv(x8, scale) = x8 * scale in float32. The arena quantizes as it stores
(gpu/paged_kv.PagedKVArena.store, kv_store_fp8.py); the kernels that read it
(prefix_attention) dequantize inside their tiles; this module is the readers' reference.

In the arena a page's scales lie head-major, [P, Hkv, PAGE] (`scales_by_head`), beside values
[P, PAGE, Hkv, D]: a key tile of one head reads its scales as one contiguous run rather than
one float every Hkv.
"""

from __future__ import annotations

import torch

FP8_MAX = 448.0
KV_FP8 = torch.float8_e4m3fn


def quantize_kv(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] in any float dtype -> (e4m3 [..., D], float32 scale [...])."""
    xf = x.float()
    scale = (xf.abs().amax(dim=-1) / FP8_MAX).clamp_min(torch.finfo(torch.float32).tiny)
    x8 = (xf / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(KV_FP8)
    return x8, scale


def dequantize_kv(x8: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """(e4m3 [..., D], scale [...]) -> float32 [..., D]."""
    return x8.float() * scale[..., None]


def scales_by_head(scale: torch.Tensor) -> torch.Tensor:
    """Per-token scales [P, PAGE, Hkv] -> the arena's layout [P, Hkv, PAGE] (contiguous)."""
    return scale.transpose(1, 2).contiguous()


def scales_by_token(scale: torch.Tensor) -> torch.Tensor:
    """The arena's [..., Hkv, PAGE] scales -> [..., PAGE, Hkv] (a view), beside the values."""
    return scale.transpose(-1, -2)
