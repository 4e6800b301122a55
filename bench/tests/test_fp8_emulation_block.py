"""The CPU emulation of block-scaled fp8 (bench/fp8_emulation.py) computes what the GPU path
computes: its GEMM equals the plain-torch block-fp8 reference the GPU path checks its backends
against, on dims that are not multiples of 128; its per-projection weight blocks equal the GPU
path's fused QKV / gate-up blocks at Gemma-3-270M's shapes. And the per-decision analysis of
bench/fp8_margins.py counts flips, stable decisions and the Gaussian flip model right."""

from __future__ import annotations

import math

import torch
from torch import nn

from bench.fp8_emulation import Fp8Linear
from bench.fp8_margins import analyse, expected_flips, rank, rms_for_flips
from quail_engine.infer.gpu.linear import GpuLinear
from quail_kernels.block_fp8_gemm import (
    block_fp8_gemm_ref,
    quantize_blocks_ref,
    quantize_groups_ref,
)


def _linear(n: int, k: int, seed: int) -> nn.Linear:
    g = torch.Generator().manual_seed(seed)
    lin = nn.Linear(k, n, bias=False)
    w = torch.randn(n, k, generator=g) * 0.05
    w[:128, :128] *= 40  # one loud block
    lin.weight.data.copy_(w)
    return lin


def _wrap(w: torch.Tensor) -> nn.Linear:
    lin = nn.Linear(w.shape[1], w.shape[0], bias=False)
    lin.weight.data.copy_(w)
    return lin


def test_block_emulation_equals_the_gpu_paths_reference_gemm():
    m, n, k = 7, 208, 304  # partial 128-groups along both N and K (fp8 GEMMs need % 16)
    lin = _linear(n, k, 0)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(1)) * 3
    emulated = Fp8Linear(lin, block=True)(x)
    xq, xs = quantize_groups_ref(x)
    wq, ws = quantize_blocks_ref(lin.weight.detach())
    ref = block_fp8_gemm_ref(xq, xs, wq, ws, torch.float32)
    assert torch.allclose(emulated, ref, rtol=1e-5, atol=1e-5)
    # the GPU layer quantizes its weight to the same blocks (what its GEMM multiplies)
    gpu = GpuLinear(lin.weight.detach(), fp8=True, dtype=torch.float32, block=True,
                    block_backend="triton")
    assert torch.equal(gpu.dequantized(), Fp8Linear(lin, block=True).weight.data)
    exact = x @ lin.weight.detach().t()
    assert (emulated - exact).norm() < 0.06 * exact.norm()  # e4m3's rounding of both inputs


def test_per_projection_blocks_equal_the_fused_gemms_blocks_at_gemma_270m_shapes():
    # q 1024, k 256, v 256 rows of 640; gate and up 2048 rows: every part whole 128-row blocks,
    # so quantizing each projection (the emulation) or the fused weight (gpu/model.py) is one
    parts = [_linear(n, 640, seed).weight.detach() for seed, n in enumerate((1024, 256, 256))]
    fused = GpuLinear(torch.cat(parts), fp8=True, dtype=torch.float32, block=True,
                      block_backend="triton").dequantized()
    separate = torch.cat([Fp8Linear(_wrap(p), block=True).weight.data for p in parts])
    assert torch.equal(fused, separate)


def test_margin_analysis_counts_flips_against_float32_and_bf16():
    m32 = [-1.0, -0.05, 0.02, 0.5, 2.0, -0.3]
    bf16 = [m + 0.1 for m in m32]            # flips -0.05; largest shift 0.1
    fp8 = [-0.9, -0.2, -0.01, 0.45, 2.1, 0.05]  # flips 0.02 and -0.3 vs float32
    a = analyse({"float32": m32, "bf16": bf16, "fp8": fp8})
    assert a["decisions"] == 6 and a["stable_decisions"] == 4  # |m| > 0.1
    assert a["base_max_shift"] == 0.1
    b = a["variants"]["bf16"]
    assert b["flips_float32"] == [1] and b["agree_float32"] == round(5 / 6, 4)
    f = a["variants"]["fp8"]
    assert f["flips_float32"] == [2, 5] and f["flips_base"] == [1, 2, 5]
    assert f["agree_base_stable"] == 0.75  # -0.3 flips though bf16 decides it stably
    assert rank(m32, 2) == 0.0 and rank(m32, 5) == 0.3333  # share with a smaller |margin|


def test_gaussian_flip_model():
    ref = [0.0, 10.0, -10.0]
    assert math.isclose(expected_flips(ref, 1.0), 0.5, abs_tol=1e-9)  # the zero margin: a coin
    assert expected_flips(ref, 0.0) == 0.0
    rms = rms_for_flips([0.5, -0.5], 0.02)  # 2 * Phi(-0.5 / rms) = 0.02
    assert math.isclose(rms, 0.5 / 2.326348, rel_tol=1e-3)


def test_recheck_band_takes_the_references_decisions_under_tau():
    from bench.fp8_margins import recheck

    fp8 = [0.05, -0.4, 2.0, -3.0]
    bf16 = [-0.1, 0.2, 1.9, -2.5]  # disagrees on the first two (|fp8| 0.05 and 0.4)
    rc = recheck(fp8, bf16)
    assert rc["taus"]["0.1"] == {"agree": 0.75, "reasked": 0.25}
    assert rc["tau99"] == 0.5 and rc["taus"]["0.5"]["reasked"] == 0.5
