"""Row tiling for one-program-per-row kernels: a row of N columns is covered by two power-of-two
segments (the largest power of two <= N, then the next power of two >= the rest), so a
9,728-wide row wastes 5% of its lanes instead of 41% under next_pow2(N). Used by silu_mul
(faster this way on the H200 at the MLP's width); add_rmsnorm measured slower this way (2,560 =
2,048 + 512) and keeps one next_pow2 block (bench/probes/row_kernels.py times both kernels)."""

from __future__ import annotations

import triton


def row_segments(n_cols: int) -> tuple[int, int]:
    """(BLOCK_A, BLOCK_B): BLOCK_A <= n_cols is a power of two; BLOCK_B covers the rest (1, all
    masked off, when n_cols is itself a power of two, so kernels need no compile-time branch)."""
    if n_cols <= 0:
        raise ValueError(f"row width must be positive, got {n_cols}")
    block_a = 1 << (n_cols.bit_length() - 1)
    rest = n_cols - block_a
    return block_a, (triton.next_power_of_2(rest) if rest else 1)


def row_warps(n_cols: int, per_warp: int) -> int:
    return min(16, max(1, triton.next_power_of_2(n_cols) // per_warp))
