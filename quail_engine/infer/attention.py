"""Plain-torch attention with log-sum-exp outputs: the reference the GPU kernels must match.

Shapes follow flash-attn: q [T, H, D], k/v [T, H_kv, D] packed without padding, `cu_seqlens`
[B+1] int offsets. Every function returns (out [T, H, D] in q's dtype, lse [T, H] float32), where
lse is the natural log-sum-exp of the scaled scores of the keys each query saw (-inf when it saw
none). A request with a shared prefix runs `prefix_attention` (its queries against the prefix's
KV) and `varlen_causal_attention` (causally over its own tokens), then `merge_attention`
combines the two exactly. GQA: query head h reads KV head h // (H // H_kv).
"""

from __future__ import annotations

import torch
from torch import Tensor


def _attend(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor, scale: float) -> tuple[Tensor, Tensor]:
    """q [M, H, D], k/v [N, H_kv, D], allowed [M, N] bool -> (out [M, H, D], lse [M, H])."""
    num_q, num_heads, head_dim = q.shape
    num_kv_heads = k.shape[1]
    group = num_heads // num_kv_heads
    qf = q.float().reshape(num_q, num_kv_heads, group, head_dim).permute(1, 2, 0, 3)
    kf = k.float().permute(1, 2, 0)  # [H_kv, D, N]
    vf = v.float().permute(1, 0, 2)  # [H_kv, N, D]
    scores = torch.matmul(qf.reshape(num_kv_heads, group * num_q, head_dim), kf) * scale
    scores = scores.view(num_kv_heads, group, num_q, -1)
    scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # [H_kv, G, M]
    probs = torch.exp(scores - lse.unsqueeze(-1).clamp_min(torch.finfo(torch.float32).min))
    probs = torch.nan_to_num(probs, nan=0.0)
    out = torch.matmul(probs.view(num_kv_heads, group * num_q, -1), vf)
    out = out.view(num_kv_heads, group, num_q, head_dim).permute(2, 0, 1, 3)
    out = out.reshape(num_q, num_heads, head_dim).to(q.dtype)
    return out, lse.permute(2, 0, 1).reshape(num_q, num_heads)


def _window_mask(q_pos: Tensor, k_pos: Tensor, causal: bool, sliding_window: int | None) -> Tensor:
    diff = q_pos.view(-1, 1) - k_pos.view(1, -1)
    allowed = diff >= 0 if causal else torch.ones_like(diff, dtype=torch.bool)
    if sliding_window is not None:
        allowed = allowed & (diff < sliding_window)
    return allowed


def _chunks(bounds: list[int], budget: int) -> list[tuple[int, int]]:
    """Runs of whole consecutive sequences of at most `budget` tokens (a longer sequence forms
    its own run): one masked matmul per run instead of one per sequence."""
    runs, start = [], 0
    for a, b in zip(bounds[1:-1], bounds[2:]):
        if b - start > budget and a > start:
            runs.append((start, a))
            start = a
    if bounds[-1] > start:
        runs.append((start, bounds[-1]))
    return runs


def varlen_causal_attention(q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, scale: float,
                            sliding_window: int | None = None,
                            chunk_tokens: int = 512) -> tuple[Tensor, Tensor]:
    """Causal attention of each packed sequence over its own tokens (key j visible to query i
    when i - window < j <= i). Short sequences are batched `chunk_tokens` at a time under a
    block-diagonal mask."""
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
    bounds = [int(b) for b in cu_seqlens.tolist()]
    lengths = torch.tensor([b - a for a, b in zip(bounds[:-1], bounds[1:])], device=q.device)
    seq_of = torch.repeat_interleave(torch.arange(len(lengths), device=q.device), lengths)
    for start, end in _chunks(bounds, chunk_tokens):
        idx = torch.arange(start, end, device=q.device)
        allowed = _window_mask(idx, idx, True, sliding_window)
        allowed &= seq_of[start:end].view(-1, 1) == seq_of[start:end].view(1, -1)
        out[start:end], lse[start:end] = _attend(q[start:end], k[start:end], v[start:end],
                                                 allowed, scale)
    return out, lse


def prefix_attention(q: Tensor, q_positions: Tensor, k_prefix: Tensor, v_prefix: Tensor,
                     scale: float, sliding_window: int | None = None) -> tuple[Tensor, Tensor]:
    """Queries q [M, H, D] at absolute positions `q_positions` [M] against a prefix's KV
    [P, H_kv, D] at positions 0..P-1: every prefix key is visible (the prefix precedes the
    queries) unless it lies `sliding_window` or more positions back. Queries of several requests
    that share one prefix can be stacked into one call."""
    start = 0
    if sliding_window is not None and q_positions.numel():
        start = max(0, int(q_positions.min()) - sliding_window + 1)
    k_prefix, v_prefix = k_prefix[start:], v_prefix[start:]
    k_pos = torch.arange(start, start + k_prefix.shape[0], device=q.device)
    allowed = _window_mask(q_positions, k_pos, False, sliding_window)
    return _attend(q, k_prefix, v_prefix, allowed, scale)


def merge_attention(out_a: Tensor, lse_a: Tensor, out_b: Tensor,
                    lse_b: Tensor) -> tuple[Tensor, Tensor]:
    """Exact softmax merge of two attention results over disjoint key sets:
    out = (e^lse_a out_a + e^lse_b out_b) / (e^lse_a + e^lse_b); lse = log of the denominator."""
    lse = torch.logaddexp(lse_a, lse_b)
    safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    w_a = torch.exp(lse_a - safe).unsqueeze(-1)
    w_b = torch.exp(lse_b - safe).unsqueeze(-1)
    out = w_a * out_a.float() + w_b * out_b.float()
    return out.to(out_a.dtype), lse
