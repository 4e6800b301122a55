"""add_rmsnorm, silu_mul and qk_norm_rope against their plain-torch references."""

import pytest
import torch
from kernel_checks import check_fp8, rel_err

from quail_kernels.add_rmsnorm import add_rmsnorm, add_rmsnorm_ref
from quail_kernels.qk_norm_rope import qk_norm_rope, qk_norm_rope_ref, rope_cos_sin
from quail_kernels.silu_mul import silu_mul, silu_mul_ref

ROWS_COLS = [(1, 64), (7, 96), (33, 200), (5, 1000)]


@pytest.mark.parametrize("rows,cols", ROWS_COLS)
@pytest.mark.parametrize("with_residual", [True, False])
@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("rows_per_program", [1, 4])
def test_add_rmsnorm_matches_reference(device, rows, cols, with_residual, fp8, rows_per_program):
    g = torch.Generator().manual_seed(rows * cols)
    x = torch.randn(rows, cols, generator=g).to(device)
    res = torch.randn(rows, cols, generator=g).to(device) if with_residual else None
    w = (1 + 0.1 * torch.randn(cols, generator=g)).to(device)
    out, res_out, scale = add_rmsnorm(x, res, w, 1e-6, fp8=fp8, rows_per_program=rows_per_program)
    ref, ref_res, ref_scale = add_rmsnorm_ref(x, res, w, 1e-6, fp8=fp8)
    assert torch.allclose(res_out, ref_res, atol=1e-5)
    if fp8:
        check_fp8(out, scale, ref, ref_scale)
    else:
        assert rel_err(out, ref) < 1e-5


def test_add_rmsnorm_rejects_mismatched_weight(device):
    x = torch.randn(3, 16, device=device)
    with pytest.raises(ValueError, match="weight"):
        add_rmsnorm(x, None, torch.ones(15, device=device), 1e-6)


@pytest.mark.parametrize("rows,inter", [(1, 64), (9, 96), (17, 300)])
@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_silu_mul_matches_reference(device, rows, inter, fp8, activation):
    g = torch.Generator().manual_seed(rows + inter)
    x = (2 * torch.randn(rows, 2 * inter, generator=g)).to(device)
    out, scale = silu_mul(x, fp8=fp8, activation=activation)
    ref, ref_scale = silu_mul_ref(x, fp8=fp8, activation=activation)
    assert out.shape == (rows, inter)
    if fp8:
        check_fp8(out, scale, ref, ref_scale)
    else:
        assert rel_err(out, ref) < 1e-5


def test_gelu_and_silu_differ_and_unknown_activations_are_named(device):
    x = torch.randn(3, 64, device=device)
    assert rel_err(silu_mul(x, activation="gelu_tanh")[0], silu_mul(x)[0]) > 1e-2
    with pytest.raises(ValueError, match="'relu'"):
        silu_mul(x, activation="relu")


def test_silu_mul_rejects_odd_width(device):
    with pytest.raises(ValueError, match="even"):
        silu_mul(torch.randn(2, 7, device=device))


@pytest.mark.parametrize("tokens,hq,hkv,head_dim,norm,per_program", [
    (5, 4, 2, 32, True, None), (13, 6, 2, 64, True, None), (3, 3, 3, 16, False, None),
    (20, 8, 1, 32, True, None), (7, 8, 4, 32, True, 2), (4, 9, 3, 16, True, 3)])
def test_qk_norm_rope_matches_reference(device, tokens, hq, hkv, head_dim, norm, per_program):
    g = torch.Generator().manual_seed(tokens * hq)
    qkv = torch.randn(tokens, (hq + 2 * hkv) * head_dim, generator=g).to(device)
    positions = torch.randint(0, 500, (tokens,), generator=g).to(device)
    cos_sin = rope_cos_sin(512, head_dim, 10000.0, device)
    qn = (1 + 0.1 * torch.randn(head_dim, generator=g)).to(device) if norm else None
    kn = (1 + 0.1 * torch.randn(head_dim, generator=g)).to(device) if norm else None
    q, k, v = qk_norm_rope(qkv.clone(), positions, cos_sin, qn, kn, hq, hkv,
                           heads_per_program=per_program)
    rq, rk, rv = qk_norm_rope_ref(qkv.clone(), positions, cos_sin, qn, kn, hq, hkv)
    assert rel_err(q, rq) < 1e-5 and rel_err(k, rk) < 1e-5
    assert torch.equal(v, rv)


def test_qk_norm_rope_rejects_head_blocks_that_do_not_divide(device):
    qkv = torch.randn(2, (8 + 2 * 4) * 16, device=device)
    with pytest.raises(ValueError, match="heads_per_program 3"):
        qk_norm_rope(qkv, torch.zeros(2, dtype=torch.long, device=device),
                     rope_cos_sin(4, 16, 1e4, device), None, None, 8, 4, heads_per_program=3)


def test_add_rmsnorm_rejects_rows_per_program_not_a_power_of_two(device):
    with pytest.raises(ValueError, match="power of two"):
        add_rmsnorm(torch.randn(3, 16, device=device), None, torch.ones(16, device=device),
                    1e-6, rows_per_program=3)


def test_rope_at_position_zero_is_identity_without_norm(device):
    qkv = torch.randn(2, 3 * 32, device=device)
    q, _, _ = qk_norm_rope(qkv.clone(), torch.zeros(2, dtype=torch.long, device=device),
                           rope_cos_sin(4, 32, 1e6, device), None, None, 1, 1)
    assert torch.allclose(q.reshape(2, 32), qkv[:, :32], atol=1e-6)


def test_add_rmsnorm_keeps_a_float32_residual_stream(device):
    """fp16 sublayer output added into a float32 residual: no rounding of the stream, output
    in the GEMM's dtype."""
    g = torch.Generator().manual_seed(9)
    x = torch.randn(6, 80, generator=g).to(device, torch.float16)
    res = (100 + torch.randn(6, 80, generator=g)).to(device)
    w = torch.ones(80, device=device)
    out, res_out, _ = add_rmsnorm(x, res, w, 1e-6, out_dtype=torch.float16)
    ref, ref_res, _ = add_rmsnorm_ref(x, res, w, 1e-6, out_dtype=torch.float16)
    assert res_out.dtype == torch.float32 and out.dtype == torch.float16
    assert torch.allclose(res_out, res + x.float(), atol=1e-5)
    assert rel_err(out, ref) < 1e-3
