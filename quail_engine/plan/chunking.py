"""How many documents the executor holds resident at once (PhysicalPlan.chunking).

A filter chunk's documents stay resident across the steps that read them; a join encodes a chunk
of anchor documents once while all their partners run; the documents a filter carries into a
join wait for it. On a bounded KV arena (the GPU's paged one) each holds at most a share of it,
so that the prompts' own tokens and the next chunk still fit; where the KV store is unbounded (the
CPU engine's) only the row counts bind. The bounds are the plan's; the executor applies them to
what it observes when the step runs: the arena's size once the engine is loaded, and the
documents' tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from quail_engine.plan.cost import ModelSpec


@dataclass(frozen=True)
class Chunking:
    """`filter_rows`: rows of a filter chunk whose documents stay resident (long reports fill
    a bounded arena long before that many); `first_filter_rows` before the engine (its arena) is
    known; `limit_min_rows`: rows a LIMIT query asks at least per round of its filters.
    `anchors`: a join's anchors per chunk where the KV store is unbounded; `max_anchors` on a
    bounded arena, where `chunk_share` of it in tokens is the limit (each chunk is one operator
    call per join, with a fixed cost the device waits for, so short documents go in large
    chunks). `carry_share`: what documents carried into a join may hold (the join's own chunks
    and the prompts' own tokens need the rest)."""

    filter_rows: int = 256
    first_filter_rows: int = 16
    limit_min_rows: int = 8
    anchors: int = 128
    max_anchors: int = 1024
    chunk_share: float = 0.25
    carry_share: float = 0.5

    def text(self, filters: bool, joins: bool, carry: bool) -> str:
        """The bounds a plan uses: resident `filters` chunks, `joins`' anchor chunks, a
        `carry`."""
        parts = [f"arena_share={self.chunk_share:g}"]
        if filters:
            parts.append(f"filter_rows={self.filter_rows}")
        if joins:
            parts.append(f"anchors={self.anchors}/{self.max_anchors}")
        if carry:
            parts.append(f"carry_share={self.carry_share:g}")
        return "chunks " + " ".join(parts)

    def filter_chunk(self, capacity: int | None, mean_tokens: float,
                     tokens: Sequence[float] | None = None, first: float = 0.0) -> int:
        """Rows of a resident filter chunk on an arena of `capacity` tokens (None: unbounded),
        documents of `mean_tokens`; `tokens`: each next row's own tokens where rows share their
        beginnings (the first counted with `first` more: its shared part)."""
        if capacity is None or mean_tokens <= 0:
            return self.filter_rows
        budget = capacity * self.chunk_share
        if tokens is None:
            return max(1, min(self.filter_rows, int(budget / mean_tokens)))
        rows = total = 0
        for n in tokens[:self.filter_rows]:
            total += n
            if total + first > budget:
                break
            rows += 1
        return max(1, rows)

    def limit_chunk(self, chunk: int, missing: int) -> int:
        """Rows of the next filter chunk of an unordered LIMIT query still `missing` that many
        passing rows: twice those (some fail), at least `limit_min_rows`, at most `chunk`."""
        return min(chunk, max(self.limit_min_rows, 2 * missing))

    def carry_keep(self, capacity: int | None, resident: int, tokens: Sequence[int]
                   ) -> list[bool]:
        """Which documents of `tokens` (in order) the carry keeps beside the `resident` tokens it
        holds already, on an arena of `capacity` tokens (None: every one)."""
        if capacity is None:
            return [True] * len(tokens)
        room = int(capacity * self.carry_share) - resident
        keep = []
        for n in tokens:
            keep.append(n <= room)
            if n <= room:
                room -= n
        return keep

    def anchor_chunks(self, capacity: int | None, tokens: Sequence[int], page: int = 0
                      ) -> list[int]:
        """Sizes of consecutive anchor chunks for anchors of `tokens` each, on an arena of
        `capacity` tokens (None: unbounded) of `page` tokens a page: each document may also
        hold a copy of its last page with its questions' stem after it (a resident document
        extended: PagedKVArena.join), so each counts a page more."""
        if capacity is None:
            return [min(self.anchors, len(tokens) - c) for c in range(0, len(tokens), self.anchors)]
        budget, out, rows, used = capacity * self.chunk_share, [], 0, 0
        for n in (n + page for n in tokens):
            if rows and (rows >= self.max_anchors or used + n > budget):
                out.append(rows)
                rows, used = 0, 0
            rows += 1
            used += n
        return out + [rows] if rows else out


# the plan's chunking (plan_core); tests shrink it to make small data run in several chunks
DEFAULT = Chunking()


def map_chunk_tokens(model: ModelSpec | None, answer_tokens: int, overhead_tokens: int,
                     context: int) -> int:
    """Prompt tokens of one map chunk of an AI aggregate over a group larger than the context
    (exec/aggregate.py): the size at which a group costs least, at most `context` (the
    prompt's room).

    A chunk of C tokens costs each of its tokens C/2 attention pairs of prefill (a group's
    attention grows with C); each chunk also costs the group its template's `overhead_tokens`,
    its `answer_tokens` decoded, and those read again in the next round (more chunks, more of
    all three). Per document token, a * C/2 + lin * (2 * answer + overhead) / C, with `a` the
    FLOPs of one attention pair and `lin` those of one token through the weights (None for
    `model`: the context). Both are compute work, so the device's rate cancels; the decode's KV
    reads do not depend on C (a smaller chunk decodes beside more others). The minimum is at
    C = sqrt(2 lin (2 answer + overhead) / a): about 1.8k tokens for a 4B model writing 48
    tokens, where a chunk as long as its 40k context spends most of its prefill on attention.
    A chunk holds at least four times what it adds back, so each round still shrinks its
    group."""
    if model is None:
        return context
    layers = model.num_layers
    pair = 4 * model.num_heads * model.head_dim * layers
    lin = 2 * (model.attn_params + model.mlp_params) * layers
    added = 2 * answer_tokens + overhead_tokens
    best = int((2 * lin * added / pair) ** 0.5)
    return max(1, min(context, max(best, 4 * (answer_tokens + overhead_tokens))))
