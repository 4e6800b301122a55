"""The LSE attention pieces: split-and-merge equals one softmax over all keys."""

from __future__ import annotations

import pytest
import torch

from quail_engine.infer.attention import merge_attention, prefix_attention, varlen_causal_attention


def _dense_reference(q, k, v, q_pos, k_pos, scale, window):
    """Softmax attention written the obvious way, one query at a time."""
    group = q.shape[1] // k.shape[1]
    out = torch.zeros_like(q)
    for i in range(q.shape[0]):
        visible = (k_pos <= q_pos[i]) & ((q_pos[i] - k_pos) < (window or 10**9))
        for h in range(q.shape[1]):
            scores = (k[visible, h // group] @ q[i, h]) * scale
            out[i, h] = torch.softmax(scores, -1) @ v[visible, h // group]
    return out


@pytest.mark.parametrize("prefix_len,own_len,heads,kv_heads,window", [
    (7, 5, 4, 2, None), (1, 1, 2, 2, None), (13, 9, 6, 1, 4), (3, 11, 4, 4, 6), (0, 4, 2, 1, None),
])
@pytest.mark.parametrize("max_scores", [1, 7, 1 << 20])
def test_prefix_plus_causal_merge_equals_full_attention(prefix_len, own_len, heads, kv_heads, window,
                                                        max_scores):
    gen = torch.Generator().manual_seed(prefix_len * 31 + own_len)
    dim, scale = 8, 8 ** -0.5
    total = prefix_len + own_len
    q = torch.randn(own_len, heads, dim, generator=gen, dtype=torch.float64)
    k = torch.randn(total, kv_heads, dim, generator=gen, dtype=torch.float64)
    v = torch.randn(total, kv_heads, dim, generator=gen, dtype=torch.float64)
    q_pos = torch.arange(prefix_len, total)
    cu = torch.tensor([0, own_len], dtype=torch.int32)
    own_out, own_lse = varlen_causal_attention(q, k[prefix_len:], v[prefix_len:], cu, scale, window,
                                               max_scores=max_scores)
    pre_out, pre_lse = prefix_attention(q, q_pos, k[:prefix_len], v[:prefix_len], scale, window,
                                        max_scores=max_scores)
    merged, lse = merge_attention(own_out, own_lse, pre_out, pre_lse)
    expected = _dense_reference(q, k, v, q_pos, torch.arange(total), scale, window)
    assert torch.allclose(merged, expected, atol=1e-6)
    assert torch.isfinite(lse).all()


def test_varlen_sequences_do_not_see_each_other():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(9, 2, 4, generator=gen) for _ in range(3))
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    packed_out, _ = varlen_causal_attention(q, k, v, cu, 0.5)
    alone, _ = varlen_causal_attention(q[4:], k[4:], v[4:], torch.tensor([0, 5]), 0.5)
    assert torch.allclose(packed_out[4:], alone)


def test_lse_is_log_sum_exp_of_visible_scores():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(3, 1, 4, generator=gen) for _ in range(3))
    _, lse = varlen_causal_attention(q, k, v, torch.tensor([0, 3]), 1.0)
    expected = torch.logsumexp(k[:3, 0] @ q[2, 0], 0)
    assert torch.allclose(lse[2, 0], expected)


def test_merge_with_an_empty_side_returns_the_other():
    out = torch.randn(2, 1, 4)
    lse = torch.randn(2, 1)
    empty_lse = torch.full((2, 1), float("-inf"))
    merged, merged_lse = merge_attention(out, lse, torch.zeros_like(out), empty_lse)
    assert torch.allclose(merged, out) and torch.allclose(merged_lse, lse)


def test_prefix_entirely_outside_the_window_contributes_nothing():
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(1, 1, 4, generator=gen)
    k, v = torch.randn(3, 1, 4, generator=gen), torch.randn(3, 1, 4, generator=gen)
    out, lse = prefix_attention(q, torch.tensor([10]), k, v, 1.0, sliding_window=4)
    assert torch.isneginf(lse).all() and (out == 0).all()


@pytest.mark.parametrize("max_scores", [1, 40, 100, 1 << 20])
@pytest.mark.parametrize("window", [None, 3])
def test_grouped_varlen_equals_per_sequence_reference(max_scores, window):
    gen = torch.Generator().manual_seed(max_scores)
    lengths = [3, 1, 6, 2, 4]
    q = torch.randn(sum(lengths), 4, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(sum(lengths), 2, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    cu = torch.tensor([0, 3, 4, 10, 12, 16], dtype=torch.int32)
    out, _ = varlen_causal_attention(q, k, v, cu, 0.3, window, max_scores=max_scores)
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        pos = torch.arange(b - a)
        expected = _dense_reference(q[a:b], k[a:b], v[a:b], pos, pos, 0.3, window)
        assert torch.allclose(out[a:b], expected, atol=1e-5)
