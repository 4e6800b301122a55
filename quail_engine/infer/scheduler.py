"""Packing: which sequences run together in one forward pass. Torch-free.

A pass holds sequences packed back to back (no padding) up to `token_budget` fresh tokens and
`max_seqs` sequences. A sequence longer than the budget runs alone. Prefix tokens do not count
against the budget (their KV is already computed), but `context_budget` bounds the attention
work a pass may hold: sum over sequences of own_tokens * (prefix_tokens + own_tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SeqWork:
    """One sequence to run: `num_tokens` fresh tokens after `num_prefix_tokens` cached ones."""

    num_tokens: int
    num_prefix_tokens: int = 0

    @property
    def attention_pairs(self) -> int:
        return self.num_tokens * (self.num_prefix_tokens + self.num_tokens)


@dataclass(frozen=True)
class Scheduler:
    token_budget: int = 2048
    max_seqs: int = 256
    context_budget: int | None = None

    def __post_init__(self) -> None:
        if self.token_budget < 1 or self.max_seqs < 1:
            raise ValueError(f"token_budget and max_seqs must be >= 1, got "
                             f"{self.token_budget}, {self.max_seqs}")

    def pack(self, work: Sequence[SeqWork]) -> list[list[int]]:
        """Indices into `work`, grouped into passes, in input order (next-fit)."""
        passes: list[list[int]] = []
        current: list[int] = []
        tokens = pairs = 0
        for i, w in enumerate(work):
            if w.num_tokens < 1:
                raise ValueError(f"sequence {i} has no tokens to run")
            fits = (tokens + w.num_tokens <= self.token_budget
                    and len(current) < self.max_seqs
                    and (self.context_budget is None
                         or pairs + w.attention_pairs <= self.context_budget))
            if current and not fits:
                passes.append(current)
                current, tokens, pairs = [], 0, 0
            current.append(i)
            tokens += w.num_tokens
            pairs += w.attention_pairs
        if current:
            passes.append(current)
        return passes

    def pack_sorted(self, work: Sequence[SeqWork]) -> list[list[int]]:
        """Like `pack`, after ordering by length so passes hold sequences of similar size
        (fewer passes split across very different shapes); indices still refer to `work`."""
        order = sorted(range(len(work)), key=lambda i: (work[i].num_prefix_tokens,
                                                        work[i].num_tokens))
        return [[order[j] for j in p] for p in self.pack([work[i] for i in order])]
