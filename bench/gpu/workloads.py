"""The two benchmark workloads as token ids (random ids: speed depends on shapes, not text),
and their FLOP counts for MFU."""

from __future__ import annotations

from dataclasses import dataclass

import torch

QUESTION_TOKENS = 20  # "Is this review positive? Answer yes or no." + chat header, roughly


@dataclass
class FilterWork:
    docs: list[list[int]]  # each: document (~300 tokens, varied) + question


@dataclass
class JoinWork:
    anchors: list[list[int]]   # question + anchor document, ~4,000 tokens
    partners: list[list[int]]  # partner text + assistant header, ~15 tokens


def filter_work(num_docs: int, vocab: int, seed: int = 0, lo: int = 200, hi: int = 400) -> FilterWork:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (num_docs,), generator=g) + QUESTION_TOKENS
    flat = torch.randint(0, vocab, (int(lengths.sum()),), generator=g).tolist()
    docs, pos = [], 0
    for n in lengths.tolist():
        docs.append(flat[pos:pos + n])
        pos += n
    return FilterWork(docs)


def join_work(num_anchors: int, num_partners: int, vocab: int, seed: int = 1,
              anchor_len: tuple[int, int] = (3500, 4500),
              partner_len: tuple[int, int] = (10, 20)) -> JoinWork:
    g = torch.Generator().manual_seed(seed)
    a_lens = torch.randint(anchor_len[0], anchor_len[1] + 1, (num_anchors,), generator=g).tolist()
    p_lens = torch.randint(partner_len[0], partner_len[1] + 1, (num_partners,), generator=g).tolist()
    anchors = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in a_lens]
    partners = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in p_lens]
    return JoinWork(anchors, partners)


def linear_flops_per_token(c) -> float:
    q_dim, kv_dim = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    per_layer = (c.hidden_size * (q_dim + 2 * kv_dim) + q_dim * c.hidden_size
                 + 3 * c.hidden_size * c.intermediate_size)
    return 2.0 * c.num_layers * per_layer


def attention_flops(c, num_queries_keys: float) -> float:
    """4 * layers * q_heads * head_dim per (query, visible key) pair (QK^T and PV)."""
    return 4.0 * c.num_layers * c.num_heads * c.head_dim * num_queries_keys


def causal_pairs(n: int, prefix: int = 0) -> int:
    return n * prefix + n * (n + 1) // 2


def filter_flops(c, work: FilterWork) -> float:
    tokens = sum(len(d) for d in work.docs)
    pairs = sum(causal_pairs(len(d)) for d in work.docs)
    return linear_flops_per_token(c) * tokens + attention_flops(c, pairs)


def join_flops(c, work: JoinWork, reuse: bool = True) -> float:
    """Model FLOPs of the whole join: with reuse each anchor once + every partner suffix over
    its anchor; without, every pair's whole prompt."""
    total = 0.0
    lin = linear_flops_per_token(c)
    p_tokens = sum(len(p) for p in work.partners)
    for a in work.anchors:
        n = len(a)
        if reuse:
            total += lin * (n + p_tokens) + attention_flops(
                c, causal_pairs(n) + sum(causal_pairs(len(p), n) for p in work.partners))
        else:
            total += sum(lin * (n + len(p)) + attention_flops(c, causal_pairs(n + len(p)))
                         for p in work.partners)
    return total


def join_requested_tokens(work: JoinWork) -> int:
    p_tokens = sum(len(p) for p in work.partners)
    return sum(len(a) * len(work.partners) + p_tokens for a in work.anchors)
