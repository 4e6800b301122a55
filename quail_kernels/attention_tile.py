"""Shared pieces of the two attention kernels: GQA row packing and the online-softmax step.

A program owns one KV head and BLOCK_M rows; row r is query token r // G of the tile and query
head kv_head * G + r % G, so the G query heads that read one KV head share every K/V tile load
(G = Hq / Hkv). Scores are kept in base 2 (scaled by log2 e); the returned LSE is natural log.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def gqa_rows(tile, kv_head, G: tl.constexpr, BLOCK_M: tl.constexpr):
    """-> (token index within the sequence [BLOCK_M], query head [BLOCK_M], row valid)."""
    tok_per_tile: tl.constexpr = BLOCK_M // G
    rows = tl.arange(0, BLOCK_M)
    tok = tile * tok_per_tile + rows // G
    head = kv_head * G + rows % G
    return tok, head, rows < tok_per_tile * G


@triton.jit
def softmax_update(s, allowed, m_i, l_i, MASKED: tl.constexpr, P_DTYPE: tl.constexpr):
    """The online-softmax bookkeeping of one tile's base-2 scores s [M, N] (masked by `allowed`
    when MASKED) -> (new running max, new running sum, the tile's probabilities p [M, N] in
    P_DTYPE, the factor alpha [M] the accumulator is rescaled by). The attention kernels
    differ only in how they form s and multiply p into V.

    The running max is kept a whole number (the ceiling of the scores' max), so alpha is a
    power of two and a tile's probabilities differ between two running maxima by a power of
    two only: their rounding to P_DTYPE for the PV product is then the same whichever tiles
    came before. A row computed in two parts (the keys of a cached prefix, then its own keys,
    merged by LSE) thus forms the same products as the same row computed in one pass, where
    a max taken as is would round every probability of the second part differently. The sum
    is taken over the rounded probabilities, the weights the PV product applies: the best
    key's probability is no longer exactly 1 and would otherwise carry its rounding into the
    output alone."""
    if MASKED:
        s = tl.where(allowed, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.ceil(tl.max(s, axis=1)))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(s - m_safe[:, None]).to(P_DTYPE)
    alpha = tl.exp2(m_i - m_safe)
    return m_new, l_i * alpha + tl.sum(p.to(tl.float32), axis=1), p, alpha


@triton.jit
def tile_dot(a, b):
    """a @ b in float32; float32 operands in full precision (Triton's default rounds them to
    tf32), as a float32 model's GEMMs take them, so that its attention stays a reference."""
    if a.dtype == tl.float32:
        return tl.dot(a, b, input_precision="ieee")
    return tl.dot(a, b)


@triton.jit
def softmax_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, MASKED: tl.constexpr):
    """One K/V tile: q [M, D], k [D, N], v [N, D], allowed [M, N] (read only when MASKED)."""
    m_new, l_i, p, alpha = softmax_update(tile_dot(q, k) * qk_scale, allowed, m_i, l_i, MASKED,
                                          v.dtype)
    acc = acc * alpha[:, None] + tile_dot(p, v)
    return m_new, l_i, acc


@triton.jit
def finish(m_i, l_i, acc):
    """-> (out [M, D] float32, lse [M] natural log; 0 and -inf for rows that saw no key)."""
    empty = l_i == 0.0
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse = tl.where(empty, float("-inf"), (m_i + tl.log2(tl.where(empty, 1.0, l_i))) * 0.6931471805599453)
    return out, lse


def default_blocks(device_type: str, head_dim: int, max_seqlen: int = 0,
                   prefix: bool = False) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages): the best configs measured on the H200
    (docs/kernels-notes.md): documents (64, 32, 4, 3) (a few-hundred-token document gives each
    program only a few key tiles; measured on documents strided in a QKV buffer by
    bench/probes/row_kernels.py); one long causal sequence (an anchor of >= 1,024
    tokens) (128, 128, 8, 3); join suffixes of <= 32 tokens (64, 16, 4, 3); `prefix` (suffix
    rows over a resident prefix; `max_seqlen` its longest, 0: unknown): long key runs
    (64, 64, 4, 3), faster than (64, 32, 4, 3) over agent-trace snapshots of thousands of keys;
    prefixes under 1,024 keys (a shared question stem, a library segment's key tail)
    (64, 32, 4, 3), faster there (bench/probes/attention_passes.py `--prefix-blocks` replays
    real passes per tile shape)."""
    if device_type == "cuda":
        if head_dim > 128:
            return 64, 32, 4, 2
        if prefix:
            return (64, 32, 4, 3) if 0 < max_seqlen < 1024 else (64, 64, 4, 3)
        if max_seqlen >= 1024:
            return 128, 128, 8, 3
        return (64, 16, 4, 3) if 0 < max_seqlen <= 32 else (64, 32, 4, 3)
    return 32, 16, 4, 1


def cdiv(a: int, b: int) -> int:
    return triton.cdiv(a, b)
