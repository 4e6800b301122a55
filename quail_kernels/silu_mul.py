"""SiLU(gate) * up over the fused gate_up projection output, optionally quantized to fp8.

gate_up [T, 2I] (gate in the first I columns, up in the last I) -> out [T, I]; with fp8=True
out is float8_e4m3fn with a per-row scale [T, 1] float32 (amax / 448).

Kernel: grid (T,), one program per row, BLOCK = next_pow2(I) columns (the whole row stays in
registers so its amax needs no second pass).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from quail_kernels import FP8_MAX
from quail_kernels.checks import check_tensor


@triton.jit
def _silu_mul_kernel(x_ptr, out_ptr, scale_ptr, n_cols, stride_x, stride_o,
                     IS_FP8: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up
    if IS_FP8:
        amax = tl.maximum(tl.max(tl.abs(y), axis=0), 1e-6)
        scale = amax / 448.0
        y = tl.clamp(y / scale, -448.0, 448.0)
        tl.store(scale_ptr + row, scale)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def silu_mul(gate_up: torch.Tensor, fp8: bool = False):
    """gate_up [T, 2I] -> (out [T, I], scale [T, 1] or None)."""
    check_tensor("gate_up", gate_up, 2)
    if gate_up.shape[1] % 2:
        raise ValueError(f"gate_up last dim must be even, got {tuple(gate_up.shape)}")
    num_rows, n_cols = gate_up.shape[0], gate_up.shape[1] // 2
    out = torch.empty((num_rows, n_cols), device=gate_up.device,
                      dtype=torch.float8_e4m3fn if fp8 else gate_up.dtype)
    scale = torch.empty((num_rows, 1), device=gate_up.device, dtype=torch.float32) if fp8 else out
    if num_rows:
        block = triton.next_power_of_2(n_cols)
        _silu_mul_kernel[(num_rows,)](gate_up, out, scale, n_cols, gate_up.stride(0),
                                      out.stride(0), IS_FP8=fp8, BLOCK=block,
                                      num_warps=min(16, max(1, block // 512)))
    return out, (scale if fp8 else None)


def silu_mul_ref(gate_up: torch.Tensor, fp8: bool = False):
    gate, up = gate_up.float().chunk(2, dim=-1)
    y = F.silu(gate) * up
    if not fp8:
        return y.to(gate_up.dtype), None
    scale = y.abs().amax(-1, keepdim=True).clamp_min(1e-6) / FP8_MAX
    return (y / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale
