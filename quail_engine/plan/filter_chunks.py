"""How the executor runs one relation's filters over chunks of its rows (PhysicalPlan.filter_runs)
and when it asks the joins for the documents the filters carry (Carry.flushes).

Each chunk of rows goes through the relation's steps in order. Where a step keeps its document
resident for a later one, the documents of a chunk live for the chunk, so the chunk is bounded
on the KV arena (plan/chunking.py) by the longest of those documents (by estimate); with prefix
sharing a document that begins like the row before holds only its own pages past that beginning,
so each is counted past it (counted whole, cumulative snapshots of one trace would make chunks of
a few rows, each a few small passes). Before the engine is loaded its arena is unknown: the first
chunk is small and the next are sized once it is known (the chunk's observation point). Where
every step reads its document once, the rows run in one chunk, one pipelined call per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from quail_engine.plan.chunking import Chunking

# when the filters ask the joins early for the documents they carry (Carry.flushes)
FLUSH_OUTGROWN = "outgrown"  # a chunk's survivors do not fit the carry's share beside the rest
FLUSH_END = "filters_end"    # after the carried relation's last chunk (no later join reads it)


@dataclass(frozen=True)
class FilterRun:
    """`alias`'s `steps` (indices into PhysicalPlan.steps: its filters in order, then the
    projections run with them) over chunks of its rows. `is_resident`: a step keeps documents
    resident, so the arena bounds the chunk (else one chunk of every row); `sized_by`: the step
    whose documents bound it, of `doc_tokens` mean tokens; `counts_shared`: each counted past
    the beginning it shares with the row before (prefix sharing on)."""

    alias: str
    steps: tuple[int, ...]
    is_resident: bool
    sized_by: int | None = None
    doc_tokens: float = 0.0
    counts_shared: bool = False

    @property
    def counts_own_tokens(self) -> bool:
        """Whether the executor measures each row's own tokens to size the chunks."""
        return self.is_resident and self.counts_shared and self.doc_tokens > 0

    def rows(self, chunking: Chunking, num_rows: int, is_arena_known: bool = True,
             capacity: int | None = None, tokens: Sequence[float] | None = None,
             first: float = 0.0) -> int:
        """Rows of the next chunk of a relation of `num_rows` rows: every row where no step
        keeps documents resident; `chunking.first_filter_rows` before the arena is known; else
        as `chunking.filter_chunk` bounds it on an arena of `capacity` tokens (None: unbounded)
        given the next rows' own `tokens` and the shared part `first` of the chunk's first row,
        when measured (`counts_own_tokens`)."""
        if not self.is_resident:
            return max(1, num_rows)
        if not is_arena_known:
            return chunking.first_filter_rows
        own = None if tokens is None else [float(n) for n in tokens[:chunking.filter_rows]]
        return chunking.filter_chunk(capacity, self.doc_tokens, own, first)

    def text(self) -> str:
        head = f"filter chunks {self.alias}:"
        if not self.is_resident:
            return f"{head} every row in one chunk"
        if self.sized_by is None:
            return f"{head} filter_rows each (no document estimate)"
        shared = ", past shared beginnings" if self.counts_shared else ""
        return (f"{head} sized by #{self.sized_by}'s documents ({self.doc_tokens:.0f} tokens"
                f"{shared}); first_filter_rows until the arena is known")


def filter_run(alias: str, steps: Sequence, indices: Sequence[int], tokens_of,
               sharing: bool) -> FilterRun:
    """The run of `alias`'s `steps` (PhysicalPlan steps at `indices`); `tokens_of(op)`: the
    estimated mean tokens of the op's document on `alias`, None where the op has no estimate;
    `sharing`: prefix sharing is on. The longest document sizes the chunk (the first of equals)."""
    resident = any(not s.is_read_once for s in steps)
    sizer = max((s for s in steps if tokens_of(s.op) is not None), key=lambda s: tokens_of(s.op),
                default=None)
    if sizer is None:
        return FilterRun(alias, tuple(indices), resident)
    return FilterRun(alias, tuple(indices), resident, sizer.op, tokens_of(sizer.op), sharing)


def carry_flushes(early: str | None, star: str) -> tuple[str, ...]:
    """When the filters ask the joins for their carried documents (FLUSH_*), for a carry asked
    early as `early` (None: never; its surplus is encoded again by the join); `star`: the
    early ask of a star, which reads only the carried relation's rows, so its last chunk's are
    asked at the filters' end."""
    if early is None:
        return ()
    return (FLUSH_OUTGROWN, FLUSH_END) if early == star else (FLUSH_OUTGROWN,)
