"""Linear layers of the GPU path: bf16 through cuBLAS (F.linear), or fp8 e4m3 in one of two
schemes:

  * per channel (`fp8`): torch._scaled_mm (cuBLASLt) with weights quantized once at load, one
    scale per output channel, and activations quantized per token by the fused kernel that
    produced them;
  * block-scaled (`fp8` + `block`): weights in 128 x 128 blocks (quantized at load, or a
    published FP8 checkpoint's own fp8 weights and `weight_scale_inv` used as they are),
    activations in 1 x 128 groups written by the fused epilogues; the GEMM through cuBLASLt's
    block scaling where this torch and GPU run it (Hopper, cuBLAS >= 12.9), else the Triton
    kernel quail_kernels/block_fp8_gemm.py. The choice is probed once per device against the
    plain-torch reference (`block_backend`).

Per-channel fp8 GEMMs use cuBLASLt's fast accumulation: faster on the layer GEMMs, for a
relative error only slightly above exact accumulation's and far below e4m3's own rounding of the
inputs (bench/probes/backends.py measures both)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from quail_engine.infer.weights import dequantize_blocks
from quail_kernels.block_fp8_gemm import (
    GROUP,
    block_fp8_gemm,
    block_fp8_gemm_ref,
    quantize_blocks_ref,
    quantize_groups_ref,
)

log = logging.getLogger(__name__)

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
BLOCK_BACKENDS = ("cublas", "cublas-v1", "triton")
# cuBLASLt reads the 1x128 activation scales with M as their leading dimension: rows are padded
# to a multiple of this (16-byte aligned float32), copying x only when M is not one already;
# tests/device/fp8_block_check.py measures whether the GPU's cuBLAS needs it
ROW_MULTIPLE = 4
_probed: dict[str, str] = {}


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [N, K] -> (w_fp8 [N, K], scale [N] float32) with w ~= w_fp8 * scale[:, None]."""
    wf = w.float()
    scale = wf.abs().amax(dim=1).clamp_min(1e-12) / FP8_MAX
    return (wf / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def _cublas_block(x, x_scale, w, w_scale_t, dtype, v2: bool):
    """cuBLASLt 1x128 x 128x128 scaling. x_scale [M, Kb] strides (1, M) with M % 4 == 0 (its
    leading dimension 16-byte aligned); w_scale_t [Kb4, Nb] strides (1, Kb4) (the transpose of
    the weight's scale padded to Kb4 = round_up(Kb, 4) columns)."""
    if v2:
        return F.scaled_mm(x, w.t(), x_scale, F.ScalingType.BlockWise1x128, w_scale_t,
                           F.ScalingType.BlockWise128x128, output_dtype=dtype)
    kb = x_scale.shape[1]
    return torch._scaled_mm(x, w.t(), scale_a=x_scale, scale_b=w_scale_t[:kb].t().contiguous().t(),
                            out_dtype=dtype)


def _pad_rows(x: torch.Tensor, x_scale: torch.Tensor, multiple: int):
    """(x, x_scale) with M a multiple of `multiple` and x_scale outer-dim-major (strides
    (1, M)), copying only when they are not already so; pad rows are zeros."""
    m = x.shape[0]
    mp = -(-m // multiple) * multiple
    if mp == m and x_scale.stride(0) == 1 and (x_scale.shape[1] == 1 or x_scale.stride(1) == m):
        return x, x_scale
    xp = x
    if mp != m:
        xp = torch.zeros((mp, x.shape[1]), dtype=torch.uint8, device=x.device)
        xp[:m] = x.view(torch.uint8)
        xp = xp.view(FP8)
    sp = torch.ones((x_scale.shape[1], mp), dtype=torch.float32, device=x.device)
    sp[:, :m] = x_scale.t()
    return xp, sp.t()


def fused_weight(weights: Sequence[torch.Tensor], scales: Sequence[torch.Tensor | None],
                 device: torch.device, dtype: torch.dtype, keep_fp8: bool):
    """One GEMM's weight from its projections' (q, k, v / gate, up) stacked along N: (weight,
    its 128 x 128 block scale or None). A checkpoint's fp8 blocks stay fp8 when `keep_fp8` and
    every part is whole blocks along N; otherwise fp8 parts are dequantized to `dtype`."""
    weights = [w.to(device) for w in weights]
    if all(s is None for s in scales):
        return (weights[0] if len(weights) == 1 else torch.cat(weights)), None
    if keep_fp8 and all(s is not None for s in scales) and \
            all(w.shape[0] % GROUP == 0 for w in weights[:-1]):
        w8 = torch.cat([w.view(torch.uint8) for w in weights]).view(FP8)
        return w8, torch.cat([s.to(device).float() for s in scales])
    parts = [w.to(dtype) if s is None else dequantize_blocks(w, s.to(device), dtype=dtype)
             for w, s in zip(weights, scales)]
    return torch.cat(parts), None


class GpuLinear:
    """y = x @ W^T (no bias). fp8: x arrives as (x_fp8 [M, K], x_scale [M, 1] per channel, or
    [M, cdiv(K, 128)] when `block`). `weight_scale`: `weight` is already fp8 in 128 x 128 blocks
    (a published checkpoint's); used as is when `block`, else dequantized first."""

    def __init__(self, weight: torch.Tensor, fp8: bool, dtype: torch.dtype = torch.bfloat16,
                 fast_accum: bool = True, block: bool = False,
                 weight_scale: torch.Tensor | None = None, block_backend: str = "auto"):
        self.fp8 = fp8
        self.block = fp8 and block
        self.fast_accum = fast_accum
        self.out_features, self.in_features = weight.shape
        self.dtype = dtype
        self.scale = self.scale_t = None
        self.backend = None
        if weight_scale is not None and not self.block:
            weight = dequantize_blocks(weight, weight_scale, dtype=dtype)
        if fp8 and (self.in_features % 16 or self.out_features % 16):
            raise ValueError(f"fp8 GEMM needs dims divisible by 16, weight {tuple(weight.shape)}")
        if self.block:
            if weight_scale is None:
                weight, weight_scale = quantize_blocks_ref(weight)
            self.weight = weight.contiguous()
            self.scale = weight_scale.float().contiguous()
            kb = self.scale.shape[1]
            padded = F.pad(self.scale, (0, -kb % 4)).contiguous()
            self.scale_t = padded.t()
            self.backend = block_backend if block_backend != "auto" else \
                probe_block_backend(self.weight.device)
        elif fp8:
            w8, scale = quantize_rows(weight)
            self.weight = w8
            self.scale = scale.view(1, -1).contiguous()
        else:
            self.weight = weight.to(dtype).contiguous()

    def __call__(self, x: torch.Tensor, x_scale: torch.Tensor | None = None) -> torch.Tensor:
        if not self.fp8:
            return F.linear(x, self.weight)
        if x.shape[0] == 0:
            return torch.empty(0, self.out_features, dtype=self.dtype, device=x.device)
        if self.block:
            return block_gemm(x, x_scale, self.weight, self.scale, self.scale_t, self.dtype,
                              self.backend)
        return torch._scaled_mm(x, self.weight.t(), scale_a=x_scale, scale_b=self.scale,
                                out_dtype=self.dtype, use_fast_accum=self.fast_accum)

    def dequantized(self) -> torch.Tensor:
        """The weight as the GEMM sees it, in float32 (for error reports)."""
        if not self.fp8:
            return self.weight.float()
        if self.block:
            return dequantize_blocks(self.weight, self.scale)
        return self.weight.float() * self.scale.view(-1, 1)


def block_gemm(x, x_scale, w, w_scale, w_scale_t, dtype, backend: str) -> torch.Tensor:
    """x [M, K] fp8 (x_scale [M, Kb]) @ w [N, K]^T fp8 (w_scale [Nb, Kb]) on `backend`."""
    if backend == "triton":
        return block_fp8_gemm(x, x_scale, w, w_scale, dtype)
    m = x.shape[0]
    xp, sp = _pad_rows(x, x_scale, ROW_MULTIPLE)
    out = _cublas_block(xp, sp, w, w_scale_t, dtype, v2=backend == "cublas")
    return out[:m] if out.shape[0] != m else out


def probe_block_backend(device: torch.device | str) -> str:
    """The first of BLOCK_BACKENDS that runs on `device` and matches the plain-torch reference
    on a small GEMM (cached per device): torch's block-scaled _scaled_mm where this torch, cuBLAS
    and GPU support it, else the Triton kernel."""
    key = str(device)
    if key in _probed:
        return _probed[key]
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(6, 384, generator=g), torch.randn(256, 384, generator=g)
    xq, xs = quantize_groups_ref(x)
    wq, ws = quantize_blocks_ref(w)
    ref = block_fp8_gemm_ref(xq, xs, wq, ws, torch.float32)
    xq, xs, wq, ws = (t.to(device) for t in (xq, xs.t().contiguous().t(), wq, ws))
    ws_t = F.pad(ws, (0, -ws.shape[1] % 4)).contiguous().t()
    chosen = "triton"
    for backend in BLOCK_BACKENDS:
        if backend == "cublas" and not hasattr(F, "scaled_mm"):
            continue
        try:
            out = block_gemm(xq, xs, wq, ws, ws_t, torch.bfloat16, backend).float().cpu()
        except (RuntimeError, NotImplementedError, ValueError, TypeError) as exc:
            log.info("block-scaled fp8 GEMM: %s does not run on %s (%s)", backend, key,
                     str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            continue
        err = float((out - ref).norm() / ref.norm())
        if err < 1e-2:
            chosen = backend
            break
        log.warning("block-scaled fp8 GEMM: %s differs from the reference by %.3g on %s",
                    backend, err, key)
    log.info("block-scaled fp8 GEMMs on %s through %s", key, chosen)
    _probed[key] = chosen
    return chosen
