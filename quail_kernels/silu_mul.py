"""act(gate) * up over the fused gate_up projection output, optionally quantized to fp8; act is
SiLU (Llama, Qwen) or tanh-GELU (Gemma: x * sigmoid(2 * sqrt(2/pi) * (x + 0.044715 x^3)), the
same function as 0.5 x (1 + tanh(...))).

gate_up [T, 2I] (gate in the first I columns, up in the last I) -> out [T, I]; with fp8=True
out is float8_e4m3fn with a per-row scale [T, 1] float32 (amax / 448); with group_size=128 as
well, one scale per 1 x 128 group, [T, cdiv(I, 128)] outer-dim-major (strides (1, T)), the
activation side of block-scaled fp8 GEMMs.

Kernel: grid (T,), one program per row; the whole row stays in registers (two power-of-two
segments, row_blocks.row_segments: 9,728 = 8,192 + 2,048) so its amax needs no second pass.
Grouped kernel: grid (T,), one program per row stepping over STEP groups of G columns at a time
(a group's amax needs only its own columns).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from quail_kernels import FP8_MAX
from quail_kernels.block_fp8_gemm import quantize_groups_ref
from quail_kernels.checks import check_power_of_two, check_tensor
from quail_kernels.row_blocks import row_segments, row_warps


@triton.jit
def _act(g, GELU: tl.constexpr):
    if GELU:
        return g * tl.sigmoid(1.5957691216057308 * (g + 0.044715 * g * g * g))
    return g * tl.sigmoid(g)


@triton.jit
def _silu_mul_kernel(x_ptr, out_ptr, scale_ptr, n_cols, stride_x, stride_o,
                     IS_FP8: tl.constexpr, BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr,
                     GELU: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride_x
    ca = tl.arange(0, BLOCK_A)
    ga = tl.load(base + ca).to(tl.float32)
    ya = _act(ga, GELU) * tl.load(base + n_cols + ca).to(tl.float32)
    cb = BLOCK_A + tl.arange(0, BLOCK_B)
    mb = cb < n_cols
    gb = tl.load(base + cb, mask=mb, other=0.0).to(tl.float32)
    yb = _act(gb, GELU) * tl.load(base + n_cols + cb, mask=mb, other=0.0).to(tl.float32)
    if IS_FP8:
        amax = tl.max(tl.abs(ya), axis=0)
        amax = tl.maximum(amax, tl.max(tl.abs(yb), axis=0))
        scale = tl.maximum(amax, 1e-6) / 448.0
        ya = tl.clamp(ya / scale, -448.0, 448.0)
        yb = tl.clamp(yb / scale, -448.0, 448.0)
        tl.store(scale_ptr + row, scale)
    tl.store(out_ptr + row * stride_o + ca, ya.to(out_ptr.dtype.element_ty))
    tl.store(out_ptr + row * stride_o + cb, yb.to(out_ptr.dtype.element_ty), mask=mb)


@triton.jit
def _silu_mul_group_kernel(x_ptr, out_ptr, scale_ptr, n_cols, stride_x, stride_o, stride_sm,
                           stride_sg, G: tl.constexpr, STEP: tl.constexpr, GELU: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride_x
    groups = tl.arange(0, STEP)
    cols = tl.arange(0, G)
    num_groups = tl.cdiv(n_cols, G)
    for g0 in range(0, num_groups, STEP):
        g = g0 + groups
        c = g[:, None] * G + cols[None, :]
        ok = c < n_cols
        gate = tl.load(base + c, mask=ok, other=0.0).to(tl.float32)
        y = _act(gate, GELU) * tl.load(base + n_cols + c, mask=ok, other=0.0).to(tl.float32)
        scale = tl.maximum(tl.max(tl.abs(y), axis=1), 1e-6) / 448.0
        y = tl.clamp(y / scale[:, None], -448.0, 448.0)
        tl.store(out_ptr + row * stride_o + c, y.to(out_ptr.dtype.element_ty), mask=ok)
        tl.store(scale_ptr + row * stride_sm + g * stride_sg, scale, mask=g < num_groups)


ACTIVATIONS = ("silu", "gelu_tanh")


def silu_mul(gate_up: torch.Tensor, fp8: bool = False, num_warps: int | None = None,
             activation: str = "silu", group_size: int | None = None,
             groups_per_step: int = 4):
    """gate_up [T, 2I] -> (out [T, I], scale [T, 1] or None). `group_size` (fp8 only; 128):
    scale [T, cdiv(I, group_size)], one per group of columns."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    check_tensor("gate_up", gate_up, 2)
    if gate_up.shape[1] % 2:
        raise ValueError(f"gate_up last dim must be even, got {tuple(gate_up.shape)}")
    num_rows, n_cols = gate_up.shape[0], gate_up.shape[1] // 2
    out = torch.empty((num_rows, n_cols), device=gate_up.device,
                      dtype=torch.float8_e4m3fn if fp8 else gate_up.dtype)
    if fp8 and group_size:
        check_power_of_two("group_size", group_size)
        scale = torch.empty((triton.cdiv(n_cols, group_size), num_rows), device=gate_up.device,
                            dtype=torch.float32).t()
        if num_rows:
            _silu_mul_group_kernel[(num_rows,)](
                gate_up, out, scale, n_cols, gate_up.stride(0), out.stride(0), scale.stride(0),
                scale.stride(1), G=group_size, STEP=groups_per_step,
                GELU=activation == "gelu_tanh", num_warps=num_warps or 4)
        return out, scale
    scale = torch.empty((num_rows, 1), device=gate_up.device, dtype=torch.float32) if fp8 else out
    if num_rows:
        block_a, block_b = row_segments(n_cols)
        _silu_mul_kernel[(num_rows,)](gate_up, out, scale, n_cols, gate_up.stride(0),
                                      out.stride(0), IS_FP8=fp8, BLOCK_A=block_a,
                                      BLOCK_B=block_b, GELU=activation == "gelu_tanh",
                                      num_warps=num_warps or row_warps(n_cols, 512))
    return out, (scale if fp8 else None)


def silu_mul_ref(gate_up: torch.Tensor, fp8: bool = False, activation: str = "silu",
                 group_size: int | None = None):
    gate, up = gate_up.float().chunk(2, dim=-1)
    act = F.gelu(gate, approximate="tanh") if activation == "gelu_tanh" else F.silu(gate)
    y = act * up
    if not fp8:
        return y.to(gate_up.dtype), None
    if group_size:
        return quantize_groups_ref(y, group_size)
    scale = y.abs().amax(-1, keepdim=True).clamp_min(1e-6) / FP8_MAX
    return (y / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale
