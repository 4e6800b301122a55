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


def _attend(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor,
            scale: float) -> tuple[Tensor, Tensor]:
    """Batched: q [n, M, H, D], k/v [n, N, H_kv, D], allowed [n, M, N] bool ->
    (out [n, M, H, D] in q's dtype, lse [n, M, H] float32). Softmax in float32, in place."""
    num, num_q, num_heads, head_dim = q.shape
    num_kv_heads = k.shape[2]
    group = num_heads // num_kv_heads
    if k.shape[1] == 0:
        return torch.zeros_like(q), torch.full((num, num_q, num_heads), float("-inf"),
                                               device=q.device)
    qf = q.float().view(num, num_q, num_kv_heads, group, head_dim).permute(0, 2, 3, 1, 4)
    scores = torch.matmul(qf.reshape(num, num_kv_heads, group * num_q, head_dim),
                          k.float().permute(0, 2, 3, 1))
    scores = scores.view(num, num_kv_heads, group, num_q, -1).mul_(scale)
    scores.masked_fill_(~allowed.view(num, 1, 1, num_q, -1), float("-inf"))
    peak = scores.amax(dim=-1, keepdim=True)
    peak = torch.where(torch.isneginf(peak), torch.zeros_like(peak), peak)
    probs = scores.sub_(peak).exp_()
    total = probs.sum(dim=-1, keepdim=True)
    lse = (peak + torch.log(total)).squeeze(-1)  # [n, H_kv, G, M]; -inf where nothing is seen
    probs.div_(total.clamp_min(torch.finfo(torch.float32).tiny))
    out = torch.matmul(probs.view(num, num_kv_heads, group * num_q, -1), v.float().permute(0, 2, 1, 3))
    out = out.view(num, num_kv_heads, group, num_q, head_dim).permute(0, 3, 1, 2, 4)
    return (out.reshape(num, num_q, num_heads, head_dim).to(q.dtype),
            lse.permute(0, 3, 1, 2).reshape(num, num_q, num_heads))


def _window_mask(q_pos: Tensor, k_pos: Tensor, causal: bool, sliding_window: int | None) -> Tensor:
    diff = q_pos.unsqueeze(-1) - k_pos.unsqueeze(-2)
    allowed = diff >= 0 if causal else torch.ones_like(diff, dtype=torch.bool)
    if sliding_window is not None:
        allowed = allowed & (diff < sliding_window)
    return allowed


def _length_groups(lengths: list[int], max_scores: int) -> list[list[int]]:
    """Sequences grouped by similar length (longest first) so that each group, padded to its
    longest member, holds at most `max_scores` query-key pairs (a long sequence goes alone)."""
    order = sorted((i for i, n in enumerate(lengths) if n), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    for i in order:
        if groups and (len(groups[-1]) + 1) * lengths[groups[-1][0]] ** 2 <= max_scores:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def varlen_causal_attention(q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, scale: float,
                            sliding_window: int | None = None,
                            max_scores: int = 1 << 20) -> tuple[Tensor, Tensor]:
    """Causal attention of each packed sequence over its own tokens (key j visible to query i
    when i - window < j <= i). Sequences of similar length run as one padded batch of at most
    `max_scores` query-key pairs."""
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
    bounds = [int(b) for b in cu_seqlens.tolist()]
    lengths = [b - a for a, b in zip(bounds[:-1], bounds[1:])]
    for group in _length_groups(lengths, max_scores):
        longest = lengths[group[0]]
        if len(group) == 1:
            a, b = bounds[group[0]], bounds[group[0] + 1]
            pos = torch.arange(longest, device=q.device)
            out[a:b], lse[a:b] = _attend_blocked(q[a:b], pos, k[a:b], v[a:b], pos, True,
                                                 sliding_window, scale, max_scores)
            continue
        steps = torch.arange(longest, device=q.device)
        starts = torch.tensor([bounds[i] for i in group], device=q.device)
        valid = steps < torch.tensor([lengths[i] for i in group], device=q.device).unsqueeze(1)
        rows = (starts.unsqueeze(1) + steps).masked_fill(~valid, 0)  # [n, longest]
        allowed = _window_mask(steps, steps, True, sliding_window).unsqueeze(0) & valid.unsqueeze(1)
        out_g, lse_g = _attend(q[rows], k[rows], v[rows], allowed, scale)
        out[rows[valid]], lse[rows[valid]] = out_g[valid], lse_g[valid]
    return out, lse


def _attend_blocked(q: Tensor, q_pos: Tensor, k: Tensor, v: Tensor, k_pos: Tensor, causal: bool,
                    sliding_window: int | None, scale: float,
                    max_scores: int) -> tuple[Tensor, Tensor]:
    """One sequence's queries in blocks of at most `max_scores` query-key pairs, each block
    reading only the keys its positions can see (k_pos ascending)."""
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], float("-inf"), dtype=torch.float32, device=q.device)
    block = max(1, max_scores // max(1, k.shape[0]))
    for a in range(0, q.shape[0], block):
        pos = q_pos[a:a + block]
        lo, hi = 0, k.shape[0]
        if causal:
            hi = int(torch.searchsorted(k_pos, pos.max(), right=True))
        if sliding_window is not None:
            lo = int(torch.searchsorted(k_pos, pos.min() - sliding_window + 1))
        if hi <= lo:
            continue
        allowed = _window_mask(pos, k_pos[lo:hi], causal, sliding_window)
        o, s = _attend(q[a:a + block].unsqueeze(0), k[lo:hi].unsqueeze(0), v[lo:hi].unsqueeze(0),
                       allowed.unsqueeze(0), scale)
        out[a:a + block], lse[a:a + block] = o[0], s[0]
    return out, lse


def prefix_attention(q: Tensor, q_positions: Tensor, k_prefix: Tensor, v_prefix: Tensor,
                     scale: float, sliding_window: int | None = None,
                     max_scores: int = 1 << 20) -> tuple[Tensor, Tensor]:
    """Queries q [M, H, D] at absolute positions `q_positions` [M] against a prefix's KV
    [P, H_kv, D] at positions 0..P-1: every prefix key is visible (the prefix precedes the
    queries) unless it lies `sliding_window` or more positions back. Queries of several requests
    that share one prefix can be stacked into one call; they run in blocks of at most
    `max_scores` query-key pairs."""
    k_pos = torch.arange(k_prefix.shape[0], device=q.device)
    return _attend_blocked(q, q_positions, k_prefix, v_prefix, k_pos, False, sliding_window,
                           scale, max_scores)


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
