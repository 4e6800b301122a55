"""How much of a column's text begins like another row's: the share of its tokens that prefix
sharing across rows (infer/prefix_cache.py) computes once instead of once per row.

In sorted order a row's longest shared beginning is the one it shares with the row just before
it (a cumulative snapshot sorts right after the snapshot it extends), so the distinct tokens of
a column are the sum over sorted rows of (length - common prefix with the previous row). Only
common prefixes of at least `min_chars` characters count: the engine shares whole pages of KV
(16 tokens on the CPU, 64 on a GPU), so a shared first word saves nothing. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence

MIN_SHARED_CHARS = 256  # about one GPU page of tokens


def shared_prefix_fraction(texts: Sequence[str], sample: Sequence[int] | None = None,
                           min_chars: int = MIN_SHARED_CHARS) -> float:
    """Fraction of the characters of `texts` (of the rows `sample` indexes, default all) that
    an earlier row in sorted order already began with; 0.0 for no rows."""
    order = sorted(range(len(texts)), key=texts.__getitem__)
    previous = {i: (order[k - 1] if k else None) for k, i in enumerate(order)}
    rows = range(len(texts)) if sample is None else sample
    shared = total = 0
    for i in rows:
        text = texts[i]
        total += len(text)
        j = previous[i]
        if j is None:
            continue
        n = common_prefix_len(text, texts[j])
        if n >= min_chars:
            shared += n
    return shared / total if total else 0.0


def common_prefix_len(a: str, b: str) -> int:
    """Characters `a` and `b` begin with alike."""
    n = min(len(a), len(b))
    lo, hi = 0, n  # the longest k with a[:k] == b[:k], by bisection on slices (C speed)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
