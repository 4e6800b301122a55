"""The joins' program: what the executor does at each turn of a join order, decided here for the
plan's order and again for each order re-planned from observed rows (PhysicalPlan.replan_joins).

A turn brings one relation in: its first AI join over the joined rows' distinct pairs, then any
other AI join to the same relation as a filter over the joined rows. The plan says per turn
which step takes the documents the filters carried, whether the turn's join is asked ahead with
the next one over shared anchor chunks, which later joins may ride along its anchor chunks, and
what a chain's second-to-last join hands the last, and the KV lifetimes inside its anchor chunks
(ChunkKV). Each is a function of the order, the aliases joined before the turn and whether the
carry is still held, so a re-planned order gets its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from quail_engine.plan.context import PlanContext
from quail_engine.plan.join_order import Candidate, JoinStep
from quail_engine.plan.riding import PlannedRide, rides_along


def shares_anchor_chunks(ctx: PlanContext, step: JoinStep, nxt: JoinStep, joined) -> bool:
    """Whether join `step`, with the aliases `joined` joined, and `nxt` after it are asked ahead
    together in chunks of the relation `step` brings in, each chunk's documents encoded once for
    both: both anchored on that relation and sharing its documents, `nxt` bringing in a relation
    not joined yet and reading just those two, and no equality key tying either to the chain
    (then every pair `nxt` can ask depends on the chunk alone)."""
    anchor = step.alias
    if step.op is None or nxt.op is None or step.anchor != anchor or nxt.anchor != anchor \
            or nxt.alias in joined:
        return False
    if not ctx.ops[step.op].shares_document or not ctx.ops[nxt.op].shares_document:
        return False
    every = {*joined, anchor, nxt.alias}
    if set(ctx.ops[nxt.op].aliases) & every != {anchor, nxt.alias}:
        return False
    return not any(ctx.is_keyed(a, b) for a in (anchor, nxt.alias) for b in every if b != a)


def handoff(ctx: PlanContext, step: JoinStep, rest: Sequence[JoinStep], joined,
            relations: Sequence[str]) -> frozenset[str] | None:
    """Where the join `step` (the aliases `joined` joined before it) is the second-to-last and
    `rest` is the last, over another relation: the aliases the last join reads among those joined
    then (its prompt's, and those an equality key ties to its relation). When nothing reads the
    joined rows, `step` hands the last join only their distinct tuples, each weighted by the
    joined rows it stands for, instead of every joined row (a chain's rows can number 10^8).
    None elsewhere."""
    if len(rest) != 1 or rest[0].alias == step.alias or len(joined) + 2 != len(relations):
        return None
    nxt = rest[0]
    reads = set(ctx.ops[nxt.op].aliases) if nxt.op is not None else set()
    return frozenset(a for a in (*joined, step.alias)
                     if a in reads or ctx.is_keyed(a, nxt.alias))


def held_projections(ctx: PlanContext, step: JoinStep, joined, projections: Sequence[int]
                     ) -> tuple[int, ...]:
    """The projections of `projections` (over several relations) that read only the relations
    the join `step` holds when the aliases `joined` are joined: those its prompt reads, those
    an equality key ties to its relation, and its relation. Each is asked for the pairs a chunk
    of its anchors keeps while their documents are resident; the others after the joins."""
    if step.op is None:
        return ()
    reads = ctx.ops[step.op].aliases
    held = {step.alias, *(a for a in joined if a in reads or ctx.is_keyed(a, step.alias))}
    return tuple(op for op in projections if set(ctx.ops[op].aliases) <= held)


TAKE, SHARE = "take", "share"


@dataclass(frozen=True)
class ChunkKV:
    """The KV lifetimes inside one ask of a join's anchor chunks (exec/anchor_chunks.ask_pairs).
    `holds`: each chunk's plain document KV is held past the join's own call, for the later joins
    riding at that chunk (those PlannedRide.is_worth keeps) and the projections over its kept
    pairs (else the join's call is the documents' last reader in the chunk). `private`: the join
    reads a KV of the chunk's own that its question stem extends, over the documents held or
    handed in (the stem's tokens are the join's alone: no later reader may see them). `handed`:
    how a chunk gets documents already resident (the filters' carry, a star's or a pair's chunk
    KV): SHARE leaves them there for a later join of the same chunk, TAKE moves them out (no
    later join reads them there)."""

    holds: bool = False
    private: bool = True
    handed: str = TAKE

    def text(self) -> str:
        parts = ["held for rides/projections"] if self.holds else []
        if self.private:
            parts.append("private per chunk")
        parts.append("resident documents " + ("shared" if self.handed == SHARE else "taken"))
        return ", ".join(parts)


# an ask no later reader of its chunk follows (an AI join applied as a filter of a turn)
PLAIN = ChunkKV()
# an ask over a chunk KV held for the next join of the same documents (a pair, a star)
SHARED = ChunkKV(handed=SHARE)


def star_anchor(cand: Candidate | None) -> str | None:
    """The relation a star of AI joins anchors on: the join order starts with it alone and each
    join brings in another relation through an AI join anchored on it, so the joins of a set of
    its rows depend on those rows alone. None for any other order."""
    if cand is None or len(cand.steps) < 2 or len(cand.start) != 1:
        return None
    (anchor,) = cand.start
    aliases = [s.alias for s in cand.steps]
    if len(set(aliases)) != len(aliases) or anchor in aliases or not all(
            s.op is not None and s.anchor == anchor for s in cand.steps):
        return None
    return anchor


@dataclass(frozen=True)
class JoinTurn:
    """`step` brings its relation in over the `joined` aliases; `filters`: the other AI joins
    to that relation, asked over the joined rows after it. `carry_at`: which of `steps` takes the
    documents the filters carried (None: none does). `paired`: the next turn's join, asked ahead
    with this one over the anchor chunks of the relation this one brings in. `rides`: the later
    joins that may ride along this join's anchor chunks. `handoff`: the aliases this join hands
    the last one, as distinct weighted tuples (None: every joined row). `is_last`: the core's
    last join; `projections`: those asked for the pairs its chunks keep (`held_projections`).
    `kv`: the KV lifetimes of its join's anchor chunks (held where it has rides or projections;
    the carry taken); `ahead_kv`: those of the two joins asked ahead over the pair's shared
    chunks (where `paired`); the turn's filters ask as PLAIN."""

    step: JoinStep
    joined: frozenset[str]
    filters: tuple[JoinStep, ...] = ()
    carry_at: int | None = None
    paired: JoinStep | None = None
    rides: tuple[PlannedRide, ...] = ()
    handoff: frozenset[str] | None = None
    is_last: bool = False
    projections: tuple[int, ...] = ()
    kv: ChunkKV = PLAIN
    ahead_kv: ChunkKV | None = None

    @property
    def steps(self) -> tuple[JoinStep, ...]:
        return (self.step, *self.filters)

    def text(self) -> str:
        parts = [s.text() for s in self.steps]
        if self.carry_at is not None:
            parts.append("(takes the carry)")
        if self.paired is not None:
            parts.append(f"(with #{self.paired.op}'s anchor chunks)")
        if self.rides:
            parts.append("(rides " + ",".join(f"#{r.op}" for r in self.rides) + ")")
        if self.handoff is not None:
            parts.append("(hands on " + ",".join(sorted(self.handoff)) + ")")
        if self.projections:
            parts.append("(projects " + ",".join(f"#{op}" for op in self.projections) + ")")
        return " ".join(parts)

    def kv_text(self) -> str:
        """Its join's anchor chunks' KV lifetimes, as `quail explain` prints them."""
        out = f"join #{self.step.op} chunk KV: {self.kv.text()}"
        if self.ahead_kv is not None:
            out += f"; ahead with #{self.paired.op}: {self.ahead_kv.text()}"
        return out


@dataclass(frozen=True)
class JoinProgram:
    """The turns the executor takes to join `order` (a Candidate: its start, steps, estimates).
    `star_kv`: the KV lifetimes of a star's joins (`star_anchor`) asked in chunks of its
    anchor's rows or of the rows the filters carried (`carry ... early=star`), each chunk's
    documents held for the next join (None where the order is no star)."""

    order: Candidate
    turns: tuple[JoinTurn, ...]
    star_kv: ChunkKV | None = None

    def text(self) -> str:
        return " ".join([",".join(self.order.start), *(t.text() for t in self.turns)])

    @property
    def paired_joins(self) -> tuple[tuple[int, int], ...]:
        """(join, next join) asked ahead together over shared anchor chunks."""
        return tuple((t.step.op, t.paired.op) for t in self.turns if t.paired is not None)

    @property
    def rides(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """(join, the later joins that may ride along its anchor chunks)."""
        return tuple((t.step.op, tuple(r.op for r in t.rides)) for t in self.turns if t.rides)

    @property
    def pair_projections(self) -> tuple[int, ...]:
        """The projections asked with the last join's chunks."""
        return tuple(op for t in self.turns for op in t.projections)


def join_program(ctx: PlanContext, cand: Candidate | None, relations: Sequence[str],
                 carried: str | None = None, hands_off: bool = False,
                 projections: Sequence[int] = ()) -> JoinProgram | None:
    """The turns joining `cand`'s order over the core's `relations`, from its start (the
    relations joined so far); `carried`: the relation whose documents the filters carried, while
    no join took them; `hands_off`: nothing reads the joined rows (a second-to-last join may
    hand the last its distinct tuples); `projections`: those over several relations that may
    be asked with the last join's chunks (PhysicalPlan.pair_projections)."""
    if cand is None:
        return None
    joined, steps, turns = set(cand.start), list(cand.steps), []
    while steps:
        group = [steps.pop(0)]
        while steps and steps[0].alias == group[0].alias:
            group.append(steps.pop(0))
        step, later = group[0], (*group[1:], *steps)
        carry_at = next((n for n, s in enumerate(group)
                         if carried is not None and s.anchor == carried), None)
        if carry_at is not None:
            carried = None
        paired = steps[0] if len(group) == 1 and steps and carry_at != 0 and \
            shares_anchor_chunks(ctx, step, steps[0], joined) else None
        is_last = len(joined) + 1 == len(relations) and len(group) == 1
        rides = rides_along(ctx, step, later, frozenset(joined))
        held = held_projections(ctx, step, joined, projections) if is_last else ()
        turns.append(JoinTurn(
            step, frozenset(joined), tuple(group[1:]), carry_at, paired, rides,
            handoff(ctx, step, later, joined, relations) if hands_off else None, is_last,
            held, ChunkKV(holds=bool(rides or held)), SHARED if paired is not None else None))
        joined.add(step.alias)
    return JoinProgram(cand, tuple(turns), SHARED if star_anchor(cand) is not None else None)
