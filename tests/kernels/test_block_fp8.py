"""Block-scaled fp8: the Triton GEMM, the 1 x 128 group quantizer and the fused epilogues' group
scales against their plain-torch references; GpuLinear's block scheme, from bf16 weights and
from a published checkpoint's fp8 blocks."""

import pytest
import torch
from kernel_checks import interpreted, rel_err

from quail_engine.infer.gpu.linear import GpuLinear, probe_block_backend
from quail_kernels.add_rmsnorm import add_rmsnorm, add_rmsnorm_ref
from quail_kernels.block_fp8_gemm import (
    block_fp8_gemm,
    block_fp8_gemm_ref,
    expand_scale,
    quantize_blocks_ref,
    quantize_groups,
    quantize_groups_ref,
)
from quail_kernels.silu_mul import silu_mul, silu_mul_ref

E4M3_REL = 0.06  # e4m3 rounds each input by up to 2^-4; products of two such inputs, summed


def _operands(m, n, k, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g) * 0.05
    w[: min(n, 128), : min(k, 128)] *= 40  # one loud block: per-block scales keep the others
    xq, xs = quantize_groups_ref(x)
    wq, ws = quantize_blocks_ref(w)
    xs = xs.t().contiguous().t()  # outer-dim-major, as the epilogues write it
    return x, w, *(t.to(device) for t in (xq, xs, wq, ws))


@pytest.mark.parametrize("m,n,k", [(1, 128, 128), (5, 200, 300), (70, 130, 256),
                                   (33, 384, 520)])
def test_block_gemm_matches_reference_and_the_exact_product(device, m, n, k):
    x, w, xq, xs, wq, ws = _operands(m, n, k, device)
    out = block_fp8_gemm(xq, xs, wq, ws, torch.float32, block_m=16, block_n=64)
    ref = block_fp8_gemm_ref(xq, xs, wq, ws, torch.float32)
    assert out.shape == (m, n)
    assert rel_err(out.cpu(), ref.cpu()) < (1e-5 if interpreted() else 2e-3)
    assert rel_err(out.cpu(), x @ w.t()) < E4M3_REL


def test_block_gemm_names_a_wrong_scale_shape(device):
    _, _, xq, xs, wq, ws = _operands(4, 128, 256, device)
    with pytest.raises(ValueError, match=r"b_scale must be \[1, 2\]"):
        block_fp8_gemm(xq, xs, wq, ws[:, :1])
    with pytest.raises(ValueError, match="a_scale"):
        block_fp8_gemm(xq, xs[:, :1], wq, ws)


@pytest.mark.parametrize("m,k", [(1, 64), (7, 128), (9, 300), (3, 1000)])
def test_group_quantizer_scales_match_reference(device, m, k):
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(k)).to(device)
    q, s = quantize_groups(x)
    rq, rs = quantize_groups_ref(x)
    assert s.shape == (m, -(-k // 128)) and s.stride() == (1, m)
    assert torch.allclose(s, rs, rtol=1e-6)
    if not interpreted():  # the interpreter's float -> fp8 cast is wrong (kernel_checks)
        assert torch.equal(q.view(torch.uint8), rq.view(torch.uint8))


def _check_grouped(out, scale, ref, ref_scale):
    assert out.dtype == torch.float8_e4m3fn and scale.stride(0) == 1
    assert torch.allclose(scale, ref_scale, rtol=1e-4)
    if not interpreted():
        full = expand_scale(scale, out.shape, 1, 128)
        ref_full = expand_scale(ref_scale, ref.shape, 1, 128)
        assert rel_err(out.float() * full, ref.float() * ref_full) < 2e-2


@pytest.mark.parametrize("rows,cols", [(1, 64), (5, 200), (3, 256), (4, 1000)])
def test_add_rmsnorm_writes_one_scale_per_group(device, rows, cols):
    g = torch.Generator().manual_seed(cols)
    x = torch.randn(rows, cols, generator=g).to(device)
    x[:, :16] *= 30  # an outlier channel: per-row scaling would flatten every other group
    res = torch.randn(rows, cols, generator=g).to(device)
    w = (1 + 0.1 * torch.randn(cols, generator=g)).to(device)
    out, res_out, scale = add_rmsnorm(x, res, w, 1e-6, fp8=True, group_size=128)
    ref, ref_res, ref_scale = add_rmsnorm_ref(x, res, w, 1e-6, fp8=True, group_size=128)
    assert scale.shape == (rows, -(-cols // 128))
    assert torch.allclose(res_out, ref_res, atol=1e-5)
    _check_grouped(out, scale, ref, ref_scale)
    if cols > 128:  # the outlier's group only: the others keep their own (smaller) scales
        assert bool((scale[:, 1:] < scale[:, :1] / 4).all())


@pytest.mark.parametrize("rows,inter", [(1, 64), (9, 300), (2, 1000)])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_silu_mul_writes_one_scale_per_group(device, rows, inter, activation):
    x = (2 * torch.randn(rows, 2 * inter, generator=torch.Generator().manual_seed(inter)))
    out, scale = silu_mul(x.to(device), fp8=True, activation=activation, group_size=128,
                          groups_per_step=2)
    ref, ref_scale = silu_mul_ref(x.to(device), fp8=True, activation=activation, group_size=128)
    assert out.shape == (rows, inter) and scale.shape == (rows, -(-inter // 128))
    _check_grouped(out, scale, ref, ref_scale)


def test_block_linear_keeps_a_checkpoints_fp8_blocks_and_matches_the_product(device):
    x, w, xq, xs, wq, ws = _operands(12, 256, 384, device, seed=3)
    from_ckpt = GpuLinear(wq, fp8=True, dtype=torch.float32, block=True, weight_scale=ws,
                          block_backend="triton")
    assert torch.equal(from_ckpt.weight.view(torch.uint8), wq.view(torch.uint8))
    assert torch.equal(from_ckpt.scale, ws)
    y = from_ckpt(xq, xs).cpu()
    assert rel_err(y, x @ w.t()) < E4M3_REL
    quantized_here = GpuLinear(w.to(device), fp8=True, dtype=torch.float32, block=True,
                               block_backend="triton")
    assert torch.equal(quantized_here.weight.view(torch.uint8), wq.view(torch.uint8))
    # the same checkpoint run per channel or in bf16 is dequantized first, not cast
    for fp8 in (False, True):
        lin = GpuLinear(wq, fp8=fp8, dtype=torch.float32, weight_scale=ws)
        assert rel_err(lin.dequantized().cpu(), w) < 0.05


def test_block_backend_probe_picks_one_that_matches_the_reference(device):
    assert probe_block_backend(device) in ("cublas", "cublas-v1", "triton")
