"""Fused residual add + RMSNorm, optionally quantizing the output to fp8 (per-row scale).

residual_out = x + residual (or x when residual is None); out = rmsnorm(residual_out) * weight.
With fp8=True, out is float8_e4m3fn and scale [T, 1] float32 holds amax(row) / 448, so that
out * scale approximates the bf16 result (the row scale torch._scaled_mm takes as scale_a); with
group_size=128 as well, scale [T, cdiv(N, 128)] (outer-dim-major, strides (1, T)) holds one
amax / 448 per 1 x 128 group, the activation side of block-scaled fp8 GEMMs.

Kernel: x, residual, out, residual_out [T, N] with unit last stride, row strides passed;
weight [N]; grid (cdiv(T, ROWS),): ROWS rows per program, BLOCK = next_pow2(N) columns, at most
4 warps. The default is 2 rows for a 16-bit residual stream (fp8 out with a bf16 residual
measured fastest at 2 rows x 4 warps on the H200) and 1 for a float32 one (bf16 out with a
float32 residual takes the same time whatever the rows and warps); bench/probes/row_kernels.py
measures them at a full pass's shape.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from quail_kernels import FP8_MAX
from quail_kernels.block_fp8_gemm import quantize_groups_ref
from quail_kernels.checks import check_power_of_two, check_same_device, check_tensor


@triton.jit
def _add_rmsnorm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, scale_ptr,
                        n_rows, n_cols, eps, stride_x, stride_r, stride_o, stride_ro,
                        stride_sm, stride_sg, HAS_RES: tl.constexpr, IS_FP8: tl.constexpr,
                        BLOCK: tl.constexpr, ROWS: tl.constexpr, G: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    r2, c2 = rows[:, None], cols[None, :]
    x = tl.load(x_ptr + r2 * stride_x + c2, mask=mask, other=0.0).to(tl.float32)
    if HAS_RES:
        x += tl.load(res_ptr + r2 * stride_r + c2, mask=mask, other=0.0).to(tl.float32)
        x = x.to(res_out_ptr.dtype.element_ty)
        tl.store(res_out_ptr + r2 * stride_ro + c2, x, mask=mask)
        x = x.to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    var = tl.sum(x * x, axis=1) / n_cols
    y = x * tl.rsqrt(var + eps)[:, None] * w[None, :]
    if IS_FP8 and G > 0:  # one scale per G columns: the row as [ROWS, BLOCK // G, G]
        y3 = tl.reshape(y, [ROWS, BLOCK // G, G])
        scale = tl.maximum(tl.max(tl.abs(y3), axis=2), 1e-6) / 448.0
        y = tl.reshape(tl.clamp(y3 / scale[:, :, None], -448.0, 448.0), [ROWS, BLOCK])
        groups = tl.arange(0, BLOCK // G)
        tl.store(scale_ptr + r2 * stride_sm + groups[None, :] * stride_sg, scale,
                 mask=(rows < n_rows)[:, None] & (groups < tl.cdiv(n_cols, G))[None, :])
    elif IS_FP8:
        amax = tl.maximum(tl.max(tl.abs(y), axis=1), 1e-6)
        scale = amax / 448.0
        y = tl.clamp(y / scale[:, None], -448.0, 448.0)
        tl.store(scale_ptr + rows, scale, mask=rows < n_rows)
    tl.store(out_ptr + r2 * stride_o + c2, y.to(out_ptr.dtype.element_ty), mask=mask)


def add_rmsnorm(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor,
                eps: float, fp8: bool = False, out_dtype: torch.dtype | None = None,
                num_warps: int | None = None, rows_per_program: int | None = None,
                group_size: int | None = None):
    """x, residual [T, N]; weight [N]. Returns (out, residual_out, scale-or-None).
    residual_out has residual's dtype (x's when residual is None: then it is x itself); out is
    fp8 when `fp8`, else `out_dtype` (default x's). `group_size` (fp8 only; 128): scale is
    [T, cdiv(N, group_size)], one per group of columns, instead of [T, 1]."""
    check_tensor("x", x, 2)
    check_tensor("weight", weight, 1)
    if weight.shape[0] != x.shape[1]:
        raise ValueError(f"weight {tuple(weight.shape)} does not match x {tuple(x.shape)}")
    if residual is not None:
        check_tensor("residual", residual, 2)
        if residual.shape != x.shape:
            raise ValueError(f"residual {tuple(residual.shape)} != x {tuple(x.shape)}")
        check_same_device(x=x, residual=residual, weight=weight)
    num_rows, n_cols = x.shape
    out = torch.empty(x.shape, device=x.device,
                      dtype=torch.float8_e4m3fn if fp8 else (out_dtype or x.dtype))
    res_out = torch.empty_like(residual) if residual is not None else x
    if group_size is not None:
        check_power_of_two("group_size", group_size)
    if fp8 and group_size:
        scale = torch.empty((triton.cdiv(n_cols, group_size), num_rows), device=x.device,
                            dtype=torch.float32).t()
    else:
        scale = torch.empty((num_rows, 1), device=x.device, dtype=torch.float32) if fp8 else out
    if num_rows == 0:
        return out, res_out, (scale if fp8 else None)
    block = triton.next_power_of_2(n_cols)
    res = residual if residual is not None else x
    if rows_per_program is None:  # two rows per program pay with a 16-bit stream only
        rows_per_program = 2 if res_out.element_size() <= 2 else 1
    if rows_per_program < 1 or rows_per_program & (rows_per_program - 1):
        raise ValueError(f"rows_per_program must be a power of two, got {rows_per_program}")
    _add_rmsnorm_kernel[(triton.cdiv(num_rows, rows_per_program),)](
        x, res, weight, out, res_out, scale, num_rows, n_cols, eps,
        x.stride(0), res.stride(0), out.stride(0), res_out.stride(0), scale.stride(0),
        scale.stride(-1), HAS_RES=residual is not None, IS_FP8=fp8, BLOCK=block,
        ROWS=rows_per_program, G=min(group_size, block) if fp8 and group_size else 0,
        num_warps=num_warps or min(4, max(1, block // 256)))
    return out, res_out, (scale if fp8 else None)


def add_rmsnorm_ref(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor,
                    eps: float, fp8: bool = False, out_dtype: torch.dtype | None = None,
                    group_size: int | None = None):
    res_out = x if residual is None else (x.float() + residual.float()).to(residual.dtype)
    h = res_out.float()
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    if not fp8:
        return y.to(out_dtype or x.dtype), res_out, None
    if group_size:
        q, scale = quantize_groups_ref(y, group_size)
        return q, res_out, scale
    scale = y.abs().amax(-1, keepdim=True).clamp_min(1e-6) / FP8_MAX
    q = (y / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, res_out, scale
