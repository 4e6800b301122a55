"""The physical plan of one core: ordered steps with estimates and the KV lifecycle.

Steps run in order: scans, AI filters per relation (in the optimizer's order), AI joins (in the
join orderer's order, anchors chosen), AI projections over the survivors. Each step names the
documents whose KV it must encode (`encode`) and those it releases afterwards (`release`): a
document stays resident exactly until the last step that reads it. When the first join anchors
on the documents its anchor relation's last filter read, the plan names that KV (`carry`): the
filters keep it for their survivors and the join takes it instead of encoding them again.

The plan is the executor's program: beside the steps it carries how the executor runs them (the
carry's early ask, a star's anchor, the filter order, where projections run, the points where the
joins are re-planned from observed row counts: plan/strategy.py), the bounds on documents held
resident at once (plan/chunking.py), each relation's filter chunks and the carry's flushes
(plan/filter_chunks.py), the LIMIT's place (plan/row_limit.py), the predicates sampled before
planning (plan/sampling.py), the order a call asks its rows in and whether it takes cached
answers (plan/call_order.py) and its batches' sizes (plan/batching.py); `text()` shows all of
it (`quail explain`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from quail_engine.plan.batching import DEFAULT as BATCHING
from quail_engine.plan.batching import Batching
from quail_engine.plan.call_order import CACHED_FIRST, REUSE_CACHED, call_order_text
from quail_engine.plan.chunking import Chunking, map_chunk_tokens
from quail_engine.plan.context import PlanContext
from quail_engine.plan.cost import Work, request_work
from quail_engine.plan.filter_chunks import FilterRun
from quail_engine.plan.join_choice import choose_join
from quail_engine.plan.join_order import Candidate, JoinEdge
from quail_engine.plan.join_program import JoinProgram, join_program
from quail_engine.plan.nodes import AiFilter, Node, Project, Scan, walk
from quail_engine.plan.riding import PlannedRide
from quail_engine.plan.row_limit import (
    PROJECT_STATEMENT,
    PROJECT_WITH_FILTERS,
    RowLimit,
)
from quail_engine.plan.sampling import SampleStep, samples_text
from quail_engine.sql.op_kinds import spec


@dataclass(frozen=True)
class Step:
    kind: str                      # scan | filter | join | project | aggregate
    alias: str
    op: int | None = None
    anchor: str | None = None      # joins: alias whose document is the shared prefix
    doc: str = ""                  # KV key: "<alias>:<binding sql>"
    encode: bool = False           # this step encodes `doc` (else it reuses resident KV)
    release: tuple[str, ...] = ()  # KV keys released after this step
    rows_in: float = 0.0
    rows_out: float = 0.0
    work: Work = Work()
    est_seconds: float = 0.0
    map_chunk: int = 0             # aggregates: a map chunk's prompt tokens past the context

    @property
    def is_read_once(self) -> bool:
        """This step encodes its document and releases it right after (a document a join
        carries is not released by its filter): one full prompt per row (one pass) beats a
        prefix pass plus a question pass, and its rows need not be chunked."""
        return self.encode and self.doc in self.release

    def text(self) -> str:
        head = self.kind if self.op is None else f"{self.kind} #{self.op}"
        parts = [f"{head} {self.alias}"]
        if self.anchor:
            parts.append(f"anchor={self.anchor}")
        if self.doc and (self.kind != "join" or not self.encode):
            parts.append(("encode " if self.encode else "reuse ") + self.doc)
        if self.release:
            parts.append("release " + ",".join(self.release))
        return " ".join(parts)


@dataclass(frozen=True)
class Carry:
    """The first join anchors on the documents `alias`'s last filter read: that filter keeps
    their KV (`doc`) for its survivors and the join takes it. `early`: how the joins are asked
    for the carried documents once they outgrow their share of the KV arena
    (plan/strategy.py), None: the surplus is encoded again by the join; `flushes`: when the
    filters ask them (plan/filter_chunks.carry_flushes)."""

    alias: str
    doc: str
    early: str | None = None
    flushes: tuple[str, ...] = ()

    def text(self) -> str:
        flush = f" flush={','.join(self.flushes)}" if self.flushes else ""
        return f"carry {self.doc} early={self.early or 'none'}{flush}"


@dataclass(frozen=True)
class PhysicalPlan:
    """`relations`, `edges`, `context`: what `replan_joins` plans the joins again from.
    `star`: the relation a star of joins anchors on (plan/strategy.py); `filter_order`: the
    relations in the order their filters run; `chunking`: how many documents the executor
    holds resident at once (plan/chunking.py); `pair_projections`: the projections over several
    relations that may be asked for each chunk of the last join's kept pairs (the last turn
    says which are); `projections_at`: where the projections run (plan/row_limit.py: with
    the filters' chunks, over the LIMIT's rows, over the joined rows after the joins, or left
    to the statement); `limit`: the statement's LIMIT where it binds this core's filters
    (plan/row_limit.core_limit); `replans`: where the
    executor plans the joins again from observed row counts (plan/strategy.py); `joins`: the
    turns the executor takes to join the best order (plan/join_program.py: paired joins,
    riding joins, the carry's taker, the handoff), made again wherever the joins are re-planned;
    `dropped_rides`: later joins asked over the documents the carried relation's filters drop
    while they are resident (plan/riding.py); `hint_remarks`: the hints the plan does not
    follow, and why; `samples`: the predicates sampled before planning (plan/sampling.py);
    `filter_runs`: each relation's filter steps over chunks of its rows, in the filter order
    (plan/filter_chunks.py); `call_order`: the order each operator call asks its rows in
    (plan/call_order.py); `cached_answers`: whether a call takes the answers the answer cache
    holds or asks every row (plan/call_order.py, from the session's cache setting); `batching`:
    how many prompts each engine batch holds, from the speed observed on the batches before
    (plan/batching.py)."""

    logical: Node
    steps: tuple[Step, ...]
    candidates: tuple[Candidate, ...] = ()
    remarks: tuple[str, ...] = field(default=())
    carry: Carry | None = None
    relations: tuple[str, ...] = ()
    edges: tuple[JoinEdge, ...] = ()
    context: PlanContext | None = field(default=None, compare=False, repr=False)
    star: str | None = None
    filter_order: tuple[str, ...] = ()
    chunking: Chunking = Chunking()
    pair_projections: tuple[int, ...] = ()
    projections_at: str = PROJECT_WITH_FILTERS
    limit: RowLimit | None = None
    replans: tuple[str, ...] = ()
    joins: JoinProgram | None = None
    dropped_rides: tuple[PlannedRide, ...] = ()
    hint_remarks: tuple[str, ...] = ()
    samples: tuple[SampleStep, ...] = ()
    filter_runs: tuple[FilterRun, ...] = ()
    call_order: str = CACHED_FIRST
    cached_answers: str = REUSE_CACHED
    batching: Batching = BATCHING

    def text(self) -> str:
        return "\n".join([*(s.text() for s in self.steps), *self.strategy_lines()])

    def strategy_lines(self) -> list[str]:
        """How the executor runs the steps beyond their order (plan/strategy.py): the chunks it
        holds resident (where a step keeps its documents resident or joins), a star's joins, the
        carry, paired joins, re-planning points, where projections run, the LIMIT's place;
        first, the samples taken before planning, the calls' order and their batches. A relation's filter
        chunks are shown where its documents stay resident; elsewhere its steps, each encoding
        and releasing its document, run over every row at once."""
        out = [samples_text(self.samples)] if self.samples else []
        if any(s.op is not None for s in self.steps):
            out += [call_order_text(self.call_order, self.cached_answers), self.batching.text()]
        resident = any(s.kind in ("filter", "project") and not s.is_read_once
                       for s in self.steps)
        if resident or self.has_joins:
            out.append(self.chunking.text(resident, self.has_joins, self.carry is not None))
        out += [run.text() for run in self.filter_runs if run.is_resident]
        if self.star is not None:
            ops = ",".join(f"#{s.op}" for s in self.candidates[0].steps)
            out.append(f"star anchor={self.star} joins {ops}")
        if self.carry is not None:
            out.append(self.carry.text())
        if self.dropped_rides:
            ops = ",".join(f"#{r.op}" for r in self.dropped_rides)
            out.append(f"ride {ops} over the documents {self.carry.alias}'s filters drop")
        for first, second in self.paired_joins:
            out.append(f"joins #{first},#{second} share anchor chunks")
        for op, riders in self.rides:
            ops = ",".join(f"#{r}" for r in riders)
            out.append(f"ride {ops} with join #{op}'s anchor chunks")
        turns = self.joins.turns if self.joins is not None else ()
        out += [turn.kv_text() for turn in turns if turn.step.op is not None]
        if self.joins is not None and self.joins.star_kv is not None and \
                (self.star_chunks is not None or
                 self.carry is not None and self.carry.early == "star"):
            out.append(f"star chunk KV: {self.joins.star_kv.text()}")
        for turn, nxt in zip(turns, turns[1:]):
            if turn.handoff is not None:
                out.append(f"join #{turn.step.op} hands join #{nxt.step.op} its distinct "
                           f"{','.join(sorted(turn.handoff))} rows, weighted")
        if self.replans:
            out.append("replan joins after " + ",".join(self.replans))
        asked = self.joins.pair_projections if self.joins is not None else ()
        if asked:
            ops = ",".join(f"#{op}" for op in asked)
            out.append(f"project {ops} with the last join's chunks")
        if self.has_joins and self.projections_at == PROJECT_STATEMENT and \
                self.reads_joined_rows:
            out.append("projections left to the statement (an outer join)")
        if self.limit is not None:
            out.append(self.limit.text())
        out += [f"aggregate #{s.op}: one prompt per group; a group past the context in map "
                f"chunks of about {s.map_chunk:,} tokens, their answers reduced"
                for s in self.steps if s.kind == "aggregate"]
        return out

    @property
    def star_chunks(self) -> str | None:
        """The star's anchor where the joins ask it in chunks of its rows ahead of the chain;
        None without a star, or where the filters carry its documents and ask its joins while
        they are resident (`carry ... early=star`)."""
        if self.star is None or self.carry is not None and self.carry.alias == self.star:
            return None
        return self.star

    @property
    def paired_joins(self) -> tuple[tuple[int, int], ...]:
        return self.joins.paired_joins if self.joins is not None else ()

    @property
    def rides(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        return self.joins.rides if self.joins is not None else ()

    @property
    def reads_joined_rows(self) -> bool:
        """Whether a step after the joins reads their rows (a projection); else the last join
        counts its rows instead of building them (DuckDB joins them again from the answers)."""
        return any(s.kind == "project" for s in self.steps)

    @property
    def est_seconds(self) -> float:
        return sum(s.est_seconds for s in self.steps)

    @property
    def has_joins(self) -> bool:
        return any(s.kind == "join" for s in self.steps)

    def replan_joins(self, rows: Mapping[str, float],
                     start: tuple[frozenset[str], float] | None = None,
                     carried: str | None = None) -> JoinProgram | None:
        """The turns joining the best order for observed row counts: `rows` per relation (the
        filters' survivors) and `start`, the relations joined so far and their row count;
        `carried`: the relation whose carried documents no join has taken yet. Before the
        first join, an order the observed survivors leave as planned keeps the plan's turns
        (its rides judged by the plan's estimates)."""
        best, _, _ = choose_join(self.relations, self.edges, self.context, rows=rows,
                                 start=start)
        if start is None and best is not None and self.joins is not None \
                and best.text() == self.joins.order.text():
            return self.joins
        return join_program(self.context, best, self.relations, carried,
                            hands_off=not self.reads_joined_rows,
                            projections=self.pair_projections)


def filter_chains(plan: Node) -> dict[str, list[AiFilter]]:
    """alias -> AI filters directly over its scan, innermost (first to run) first."""
    out: dict[str, list[AiFilter]] = {}
    for node in walk(plan):
        if isinstance(node, AiFilter) and len(node.aliases_used) == 1:
            alias = next(iter(node.aliases_used))
            out.setdefault(alias, []).insert(0, node)
    return out


def build_physical(logical: Node, ctx: PlanContext, join: Candidate | None,
                   projections: dict[int, str], remarks: tuple[str, ...] = (),
                   candidates: tuple[Candidate, ...] = (),
                   aggregates: Mapping[int, str] | None = None) -> PhysicalPlan:
    """`projections`, `aggregates`: op -> the alias it reads ("" when several)."""
    steps: list[Step] = []
    rows: dict[str, float] = {}
    for node in walk(logical):
        if isinstance(node, Scan):
            n = float(ctx.rows.get(node.alias, 0.0))
            rows[node.alias] = n
            steps.append(Step("scan", node.alias, rows_in=n, rows_out=n))
    for alias, chain in filter_chains(logical).items():
        seen: set[str] = set()
        n = rows.get(alias, 0.0)
        for f in chain:
            info = ctx.ops[f.op]
            key = f"{alias}:{f.doc}"
            encode = key not in seen
            seen.add(key)
            work = request_work(info.doc_tokens(alias), info.question_tokens, encode,
                                info.shared_tokens(alias)).scaled(n * spec(info.kind).num_requests)
            out = n * info.selectivity
            steps.append(Step("filter", alias, f.op, doc=key, encode=encode, rows_in=n,
                              rows_out=out, work=work, est_seconds=ctx.seconds(work)))
            n = out
        rows[alias] = n
    for js in (join.steps if join is not None else ()):
        if js.op is None:
            continue
        key = f"{js.anchor}:anchors#{js.op}"
        steps.append(Step("join", js.alias, js.op, anchor=js.anchor, doc=key, encode=True,
                          release=(key,), rows_in=js.rows_in, rows_out=js.rows_out,
                          work=js.work, est_seconds=ctx.seconds(js.work)))
    final_rows = join.rows if join is not None else (next(iter(rows.values())) if rows else 0.0)
    has_joins = any(s.kind == "join" for s in steps)
    resident = set() if has_joins else {s.doc for s in steps if s.kind == "filter"}
    for op, alias in projections.items():
        info = ctx.ops[op]
        key = f"{alias}:{info.doc}" if alias else ""
        encode = key not in resident
        n = final_rows
        work = request_work(info.doc_tokens(alias) if alias else 0.0,
                            info.question_tokens + (0.0 if alias else info.doc_tokens()),
                            encode, info.shared_tokens(alias or None)
                            ).scaled(n * spec(info.kind).num_requests)
        steps.append(Step("project", alias, op, doc=key, encode=encode, rows_in=n, rows_out=n,
                          work=work, est_seconds=ctx.seconds(work)))
        resident.add(key)
    for op, alias in (aggregates or {}).items():
        steps.append(aggregate_step(op, alias, final_rows, ctx))
    steps, carry = _carry(_with_releases(steps), ctx)
    return PhysicalPlan(logical, steps, tuple(candidates), remarks, carry)


# an aggregate's answer length where its OpInfo names none (the executor and `quail explain`
# always do): a generated answer's default (GenerateReadout.max_tokens; plan/ imports nothing
# of infer/)
AGGREGATE_ANSWER_TOKENS = 64


def aggregate_step(op: int, alias: str, rows: float, ctx: PlanContext) -> Step:
    """An AI aggregate over the core's `rows`: each group's texts read once in one prompt
    (DuckDB groups the rows; the operator answers each group: exec/udfs.py), its work counted
    as if all rows were one group up to the map chunk that bounds a group's attention past the
    context. The chunk is the step's parameter, and the executor cuts every group past the
    context to it (exec/aggregate.py): plan/chunking.map_chunk_tokens for the model that writes
    the answer, at its measured length. The groups are not known before DuckDB forms them, so
    rows out is the rows in, their upper bound."""
    info = ctx.ops[op]
    tokens = rows * (info.doc_tokens(alias) if alias else info.doc_tokens())
    answer = int(info.answer_tokens) or AGGREGATE_ANSWER_TOKENS
    chunk = map_chunk_tokens(ctx.writer or ctx.model, answer, int(info.question_tokens),
                             1 << 30)  # (the context only lowers it; the executor applies it)
    span = min(tokens, float(chunk))
    work = Work(fresh_tokens=tokens + info.question_tokens,
                attention_pairs=tokens * span / 2)
    return Step("aggregate", alias, op, rows_in=rows, rows_out=rows, work=work,
                est_seconds=ctx.seconds(work), map_chunk=chunk)


def _carry(steps: tuple[Step, ...], ctx: PlanContext) -> tuple[tuple[Step, ...], Carry | None]:
    """The first join anchored on a document its alias's filters left resident releases that
    document itself (the filters keep it for their survivors)."""
    joins = [i for i, s in enumerate(steps) if s.kind == "join"]
    if not joins or (steps[joins[0]].op, steps[joins[0]].anchor) not in ctx.resident:
        return steps, None
    j = joins[0]
    filters = [i for i, s in enumerate(steps) if s.kind == "filter" and s.alias == steps[j].anchor]
    if not filters:
        return steps, None
    out = list(steps)
    key = out[filters[-1]].doc
    out[filters[-1]] = replace(out[filters[-1]], release=tuple(
        k for k in out[filters[-1]].release if k != key))
    out[j] = replace(out[j], doc=key, encode=False, release=(key,))
    return tuple(out), Carry(out[j].anchor, key)


def _with_releases(steps: list[Step]) -> tuple[Step, ...]:
    last: dict[str, int] = {}
    for i, s in enumerate(steps):
        if s.doc and s.kind in ("filter", "project"):
            last[s.doc] = i
    out = list(steps)
    for key, i in last.items():
        out[i] = replace(out[i], release=(*out[i].release, key))
    return tuple(out)


def read_alias(ctx: PlanContext, op: int) -> str:
    """The one relation `op` reads, or "" when it reads several."""
    aliases = ctx.ops[op].aliases
    return aliases[0] if len(aliases) == 1 else ""


def projection_aliases(logical: Node, ctx: PlanContext) -> dict[int, str]:
    return {op: read_alias(ctx, op) for node in walk(logical) if isinstance(node, Project)
            for op in node.ops}
