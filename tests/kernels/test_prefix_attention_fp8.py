"""prefix_attention over an e4m3 arena (one float32 scale per token and KV head: kv_fp8.py)
against attention over the dequantized K/V in torch (its exact reference), and within a loose
bound of the same keys and values held unquantized."""

import pytest
import torch
from kernel_checks import fp32_tol, rel_err
from paged_blocks import pages_each, shuffled_block_table

from quail_kernels.kv_fp8 import (
    FP8_MAX,
    KV_FP8,
    dequantize_kv,
    quantize_kv,
    scales_by_head,
)
from quail_kernels.prefix_attention import prefix_attention, prefix_attention_ref

# e4m3 keeps 3 mantissa bits: each value within 1/16 of itself (half a step); the output's
# relative error over these inputs was seen at 0.02-0.06 across seeds
LOOSE = 0.08


def _case(q_lens, prefix_lens, hq, hkv, page, device, seed, head_dim=32):
    g = torch.Generator().manual_seed(seed)
    pages = pages_each(prefix_lens, page)
    num_pages = sum(pages) + 2
    # keys and values of very different sizes per token and head: what the scales are for
    size = torch.exp(torch.randn(num_pages, page, hkv, 1, generator=g))
    k = torch.randn(num_pages, page, hkv, head_dim, generator=g) * size
    v = torch.randn(num_pages, page, hkv, head_dim, generator=g) * size.flip(0)
    table = shuffled_block_table(pages, num_pages, g)
    q = torch.randn(sum(q_lens), hq, head_dim, generator=g) * 0.3
    cu = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32)
    plen = torch.tensor(prefix_lens, dtype=torch.int32)
    return [t.to(device) for t in (q, k, v, cu, table, plen)]


def _quantized(x):
    """[P, PAGE, Hkv, D] -> (e4m3 values, dequantized, the arena's [P, Hkv, PAGE] scales)."""
    x8, scale = quantize_kv(x)
    return x8, dequantize_kv(x8, scale), scales_by_head(scale)


def test_quantize_kv_scales_each_head_by_its_largest_value():
    x = torch.tensor([[[1.0, -3.0, 0.5], [0.0, 0.0, 0.0]]])  # [1 token, 2 heads, 3]
    x8, scale = quantize_kv(x)
    assert x8.dtype == KV_FP8 and scale.shape == (1, 2)
    assert scale[0, 0] == 3.0 / FP8_MAX and float(x8[0, 0, 1]) == -FP8_MAX
    assert torch.equal(dequantize_kv(x8, scale)[0, 1], torch.zeros(3))  # zeros stay zeros
    assert torch.allclose(dequantize_kv(x8, scale), x, rtol=1 / 16)


CASES = [  # (q_lens, prefix_lens, hq, hkv, page)
    ([3], [40], 4, 2, 16),
    ([15, 1, 30], [16, 0, 70], 6, 2, 16),
    ([1, 1, 1], [33, 100, 7], 4, 1, 32),  # decode-like: one query token per segment
]


@pytest.mark.parametrize("q_lens,prefix_lens,hq,hkv,page", CASES)
def test_fp8_arena_matches_attention_over_dequantized_kv(device, q_lens, prefix_lens, hq, hkv,
                                                         page):
    q, k, v, cu, table, plen = _case(q_lens, prefix_lens, hq, hkv, page, device, 11)
    (k8, kd, ks), (v8, vd, vs) = _quantized(k), _quantized(v)
    args = (cu, table, plen, max(q_lens), 0.17)
    out, lse = prefix_attention(q, k8, v8, *args, k_scale=ks, v_scale=vs)
    ref, ref_lse = prefix_attention_ref(q, kd, vd, *args)
    assert rel_err(out, ref) < fp32_tol()
    finite = torch.isfinite(ref_lse)
    assert torch.equal(finite, torch.isfinite(lse))
    assert torch.allclose(lse[finite], ref_lse[finite], atol=fp32_tol(), rtol=fp32_tol())
    # the reference reads the e4m3 arena itself the same way
    ref8, _ = prefix_attention_ref(q, k8, v8, *args, k_scale=ks, v_scale=vs)
    assert rel_err(out, ref8) < fp32_tol()
    # and the unquantized arena's answer is near
    full, _ = prefix_attention(q, k, v, *args)
    assert rel_err(out, full) < LOOSE


@pytest.mark.parametrize("window", [5, 40])
def test_fp8_arena_sliding_window_matches_dequantized_reference(device, window):
    q_lens, prefix_lens = [4, 2], [50, 20]
    q, k, v, cu, table, plen = _case(q_lens, prefix_lens, 4, 2, 16, device, 3)
    (k8, kd, ks), (v8, vd, vs) = _quantized(k), _quantized(v)
    positions = torch.tensor([50, 51, 52, 53, 20, 21], device=device)
    args = (cu, table, plen, max(q_lens), 0.3)
    out, _ = prefix_attention(q, k8, v8, *args, window=window, positions=positions,
                              k_scale=ks, v_scale=vs)
    ref, _ = prefix_attention_ref(q, kd, vd, *args, window=window, positions=positions)
    assert rel_err(out, ref) < fp32_tol()


def test_fp8_arena_needs_its_scales_and_a_bf16_arena_takes_none(device):
    q, k, v, cu, table, plen = _case([2], [20], 2, 1, 16, device, 5)
    (k8, _, ks), (v8, _, vs) = _quantized(k), _quantized(v)
    args = (cu, table, plen, 2, 0.3)
    with pytest.raises(ValueError, match="needs k_scale"):
        prefix_attention(q, k8, v8, *args)
    with pytest.raises(ValueError, match="does not match"):  # (per token, not by head)
        prefix_attention(q, k8, v8, *args, k_scale=quantize_kv(k)[1], v_scale=vs)
    with pytest.raises(ValueError, match="scales are for an fp8 arena"):
        prefix_attention(q, k, v, *args, k_scale=ks, v_scale=vs)


@pytest.mark.parametrize("blocks", [(16, 64, 2, 3), (64, 64, 4, 3)])
def test_decode_step_over_an_fp8_arena_at_the_engines_shape(device, blocks):
    """The decode step's call as the engine makes it: one bf16 query token per sequence, heads
    of 128, pages of 64, the decode tile and the prefix passes' long-key tile. The products run in float16 and, compiled, V is
    read as int32 words converted by inline PTX; the output is bf16, within its rounding of
    attention over the dequantized arena in float32."""
    prefix_lens = [64, 130, 1, 200]
    q, k, v, cu, table, plen = _case([1] * 4, prefix_lens, 8, 2, 64, device, 21, head_dim=128)
    (k8, kd, ks), (v8, vd, vs) = _quantized(k), _quantized(v)
    args = (cu, table, plen, 1, 128 ** -0.5)
    out, lse = prefix_attention(q.bfloat16(), k8, v8, *args, blocks=blocks, k_scale=ks,
                                v_scale=vs)
    ref, ref_lse = prefix_attention_ref(q, kd, vd, *args)
    assert out.dtype == torch.bfloat16
    assert rel_err(out.float(), ref) < 1e-2
    assert torch.allclose(lse, ref_lse, atol=2e-2, rtol=1e-2)
