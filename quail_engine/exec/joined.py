"""The joined rows of a core's AI joins, held by column: scan row indices per alias, never a
Python object per row (a chain's joined rows can number 10^8); what the prompts need is their
distinct bindings (`Joined.distinct`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

ROW = np.int32  # a scan row index in Joined (a chain's joined rows can number 10^8)


@dataclass
class Joined:
    """The joined rows so far, by column: alias -> scan row indices (equal-length ROW
    arrays). Never built row by row: a chain of joins can hold tens of millions of rows
    (reviews-aspects-reviews-aspects), which DuckDB's final
    statement joins again from the answers; what the prompts need is their distinct bindings."""
    cols: dict[str, np.ndarray] = field(default_factory=dict)
    # how many joined rows each row stands for (None: one each): a chain's second-to-last join
    # keeps only the distinct tuples the last join reads, each counted (`expand`'s `keep`)
    weight: np.ndarray | None = None

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0

    @property
    def size(self) -> int:
        """The joined rows this holds (its rows' weights summed)."""
        return int(self.weight.sum()) if self.weight is not None else len(self)

    def multiplicity(self, inv: np.ndarray, k: int) -> np.ndarray:
        """Joined rows per distinct tuple, given each row's tuple `inv` (from `distinct`)."""
        if self.weight is None:
            return np.bincount(inv, minlength=k)
        return np.bincount(inv, weights=self.weight, minlength=k).astype(np.int64)

    @property
    def aliases(self) -> list[str]:
        return list(self.cols)

    def distinct(self, aliases: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(the distinct tuples of `aliases`' row indices [k, len(aliases)], each row's tuple)."""
        if not aliases:
            return np.zeros((1 if len(self) else 0, 0), np.int64), np.zeros(len(self), np.int64)
        cols = [self.cols[a] for a in aliases]
        radix = [int(c.max()) + 1 if len(c) else 1 for c in cols]
        if len(self) and min(int(c.min()) for c in cols) >= 0 and math.prod(radix) < 1 << 62:
            # one int64 per tuple (mixed radix keeps the tuples' order): a 1-D unique of
            # integers, 16x faster than np.unique(axis=0) over 5M pairs
            key = cols[0].astype(np.int64)
            for c, r in zip(cols[1:], radix[1:]):
                key = key * r + c
            ukey, inv = _unique_ints(key, math.prod(radix))
            uniq = np.empty((len(ukey), len(cols)), np.int64)
            for j in range(len(cols) - 1, -1, -1):
                ukey, uniq[:, j] = np.divmod(ukey, radix[j])
            return uniq, inv
        uniq, inv = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
        return uniq, inv.reshape(-1)

    def take(self, index: np.ndarray) -> Joined:
        return Joined({a: c[index] for a, c in self.cols.items()},
                      self.weight[index] if self.weight is not None else None)

    def rows(self) -> list[dict[str, int]]:
        """Row by row (tests, small results; a weighted row once)."""
        cols = {a: c.tolist() for a, c in self.cols.items()}
        return [{a: cols[a][i] for a in cols} for i in range(len(self))]


# distinct keys below this many values are found by a table of them, not by sorting
DENSE_KEYS = 1 << 25


def _unique_ints(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(key, return_inverse=True) of non-negative int64 keys below `size`. Where the
    keys are few (a table of `size` fits DENSE_KEYS and the keys' count), by marking each in
    that table instead of sorting: a chain's later join reads the distinct documents of tens
    of millions of joined rows, and sorting them keeps the GPU idle."""
    if size > DENSE_KEYS or size > 8 * len(key) + 1024:
        uniq, inv = np.unique(key, return_inverse=True)
        return uniq, inv.reshape(-1)
    present = np.zeros(size, bool)
    present[key] = True
    uniq = np.flatnonzero(present)
    rank = np.cumsum(present, dtype=np.int64) - 1
    return uniq, rank[key]
