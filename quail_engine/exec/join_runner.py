"""Run a core's AI joins in the planned order, re-planning the rest after each join.

The joined set is held by column (Joined). Joining a relation asks its AI predicate once per
distinct pair of (the joined aliases the prompt reads, a survivor of the new relation),
restricted by the equality keys (shared k_<n> scan columns) before any prompt runs; the joined
rows then grow by index arithmetic. Pairs are grouped by anchor document; a chunk of anchors is
encoded once (KV resident) while all their partners run, then released.
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.doc_kv import DocKV, kv_capacity_tokens, kv_page_tokens
from quail_engine.exec.join_values import bound_aliases, combo_values, pair_values, tuple_values
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.rides import (
    PairProjection,
    Ride,
    ask_projection,
    ask_riding,
    prepare_ride,
    project_pairs,
    ride_alongs,
)
from quail_engine.exec.scans import ScanData
from quail_engine.plan.chunking import Chunking
from quail_engine.plan.join_order import JoinStep
from quail_engine.plan.physical import PhysicalPlan
from quail_engine.plan.riding import kept_rows
from quail_engine.plan.strategy import (
    REPLAN_FILTERS,
    REPLAN_JOIN,
    handoff,
    shares_anchor_chunks,
)

log = logging.getLogger(__name__)
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


def _ask(step: JoinStep, op, values: list[tuple], runner: OpRunner, store: AnswerStore,
         carry: DocKV | None, chunking: Chunking, every_pair: bool = True, share: bool = False,
         rides: list[Ride] = (), projections: list[PairProjection] = ()) -> list[bool]:
    """Answer `values` (distinct binding tuples) of the AI join `step`, anchors grouped so that
    a chunk of them (the plan's `chunking`) is encoded once while all its partners run; ->
    whether each passes.
    `every_pair`: these are all the pairs the join will ask (the operator is then complete).
    `share`: the anchors' documents stay in `carry` for a later join (else they move out).
    `rides`: later joins asked over each chunk's documents while they are resident (Ride);
    `projections`: projections asked for each chunk's passing pairs then (PairProjection)."""
    layout = runner.layout(op)
    need = store.missing(step.op, values)
    by_anchor: dict[tuple, list[tuple]] = {}  # anchor's binding values -> its pairs
    slots = layout.doc_slots
    for v in need:
        if any(x is None for x in v):
            store.put(step.op, v, None)
            continue
        by_anchor.setdefault(tuple(v[i] for i in slots), []).append(v)
    groups = anchor_chunks(list(by_anchor), by_anchor, layout, runner, chunking)
    chunks = [[v for a in group for v in by_anchor[a]] for group in groups]
    with ThreadPoolExecutor(1, thread_name_prefix="quail-prepare") as helper:
        ahead: list[Future] = []

        def prepare_next(rows: list[tuple]) -> None:
            ahead.append(helper.submit(runner.prepare, layout, rows))

        # the rows this join keeps so far (an earlier call's too: the filters' flushes)
        asked = store.count(step.op) if rides else 0
        passed = sum(1 for _, a in store.answers(step.op) if op.passes(a)) if asked else 0
        for c, (group, chunk) in enumerate(zip(groups, chunks)):
            prep = ahead.pop().result() if ahead else None
            texts = [layout.texts(by_anchor[a][0])[0] for a in group]
            # once some of its pairs are answered, the later joins worth it ride along, judged
            # again at each chunk from the rows this join kept so far (plan/riding.py), their
            # pairs prepared on the helper while the engine runs this join's (else the engine
            # waits for that host work on every call)
            kept = kept_rows(asked, passed, step.rows_in)
            riding = [(r, helper.submit(prepare_ride, r, texts, runner, store))
                      for r in rides if asked and r.worth(kept)]
            for r, _ in riding:
                note = (f"join #{r.op_id} was asked over join #{step.op}'s anchor documents "
                        "while they were resident")
                if note not in runner.report.remarks:
                    runner.report.remarks.append(note)
            hold = None  # the chunk's plain document KV, for this join and those riding along
            if riding or projections:
                hold = runner.doc_kv()
                if carry is not None:
                    (hold.share if share else hold.take)(carry, texts)
            kv = runner.doc_kv(private=True)  # this chunk's alone (its question stem extends it)
            if hold is not None:
                kv.share(hold, texts)
            elif carry is not None:  # the anchors' documents, as the filters left them resident
                (kv.share if share else kv.take)(carry, texts)
            # the next chunk's prompts, keys and cached answers are prepared on a helper thread
            # while the engine runs this chunk's later batches (else the GPU waits for it
            # between chunks)
            start_next = None if c + 1 == len(chunks) else partial(prepare_next, chunks[c + 1])
            try:
                answers = runner.answer(step.op, layout, chunk, kv=kv, release_done=True,
                                        prep=prep, ahead=start_next)
                for v, a in zip(chunk, answers):
                    store.put(step.op, v, a)
                asked += len(chunk)
                passed += sum(1 for a in answers if op.passes(a))
                kv.release()
                for ride, ready in riding:
                    ask_riding(ride, *ready.result(), hold, texts, runner, store)
                for pr in projections:
                    ask_projection(pr, pr.values(chunk, answers, op), runner, store)
            finally:
                kv.release()
                if hold is not None:
                    hold.release()
    if every_pair:
        store.complete.add(step.op)  # every candidate pair was asked
    return [op.passes(store.get(step.op, v)) for v in values]


def anchor_chunks(anchors: list[tuple], by_anchor: dict, layout, runner: OpRunner,
                  chunking: Chunking) -> list[list[tuple]]:
    """Anchors in chunks encoded together, as the plan's `chunking` bounds them on the engine's
    KV arena (none: by count alone); on an arena, documents the engine's prefix cache still
    holds first."""
    capacity = kv_capacity_tokens(runner.engine) if anchors else None
    if capacity is None:
        sizes = chunking.anchor_chunks(None, [0] * len(anchors))
    else:
        sizer = runner.doc_kv()
        texts = [layout.texts(by_anchor[a][0])[0] for a in anchors]
        anchors = runner.cached_first(anchors, texts)  # documents still cached by content first
        texts = [layout.texts(by_anchor[a][0])[0] for a in anchors]
        sizer.tokenize(texts)
        # each document may also hold a copy of its last page with the question stem after it
        # (DocKV.set_stem on resident documents: PagedKVArena.join)
        page = kv_page_tokens(runner.engine)
        sizes = chunking.anchor_chunks(capacity, [len(sizer.heads[t]) + page for t in texts])
    out, c = [], 0
    for n in sizes:
        out.append(anchors[c:c + n])
        c += n
    return out


def expand(step: JoinStep, cur: Joined, alias: str, scans: dict[str, ScanData],
            survivors: list[int], ai_ops, runner: OpRunner, store: AnswerStore,
            carry: DocKV | None, chunking: Chunking, materialize: bool = True,
            count: bool = True, share: bool = False, rides: list[Ride] = (),
            project: list[int] = (), keep: frozenset[str] | None = None) -> Joined:
    """`cur` joined with `alias`'s survivors: pairs restricted by the equality keys (shared
    k_<n> scan columns), then by `step`'s AI predicate, asked once per distinct binding pair.
    Without `materialize` (the last join, when nothing reads the joined rows) the rows are
    counted, not built: an empty Joined. Without `count`, the report is left alone and the
    operator not marked complete (a join asked ahead for some rows; run_joins asks the rest and
    counts every row later). `share`: `carry`'s documents stay there for a later join.
    `rides`: later joins asked over the anchors' chunks (Ride); `project`: AI projections
    over the pairs this join keeps, the core's last (PairProjection). `keep`: the aliases the
    only join left reads (its prompt's and equality keys'), when nothing else reads the joined
    rows: if the pairs asked here hold them all, the result is those pairs, each weighted by
    the joined rows it stands for, instead of every joined row (a few aspects times the
    reviews, weighted, instead of the chain's millions of rows for its last join to read)."""
    new = scans[alias]
    keys_by = {a: sorted(scans[a].key_columns & new.key_columns) for a in cur.aliases}
    keys_by = {a: k for a, k in sorted(keys_by.items()) if k}
    op = ai_ops[step.op] if step.op is not None else None
    proj = _reads(step, ai_ops, scans, cur.aliases)
    distinct, inv = cur.distinct(proj)
    if keys_by:
        index: dict[tuple, list[int]] = {}
        for j in survivors:
            k = tuple(new.key(j, keys) for keys in keys_by.values())
            if all(None not in part for part in k):
                index.setdefault(k, []).append(j)
        col = {a: proj.index(a) for a in keys_by}
        cands = [index.get(tuple(scans[a].key(int(d[col[a]]), keys)
                                 for a, keys in keys_by.items()), []) for d in distinct]
    else:
        cands = [list(survivors)] * len(distinct)
    if op is None:
        passing = cands
    else:  # every distinct (bound tuple, partner) once
        flat = [(d, j) for d, js in enumerate(cands) for j in js]
        bound_rows = distinct.tolist()
        values = pair_values(step.op, op, scans, proj, bound_rows, alias, flat)
        projections = project_pairs(list(project), ai_ops, scans, proj, bound_rows, alias,
                                     flat, values, runner) if project else []
        ok = _ask(step, op, values, runner, store, carry, chunking, every_pair=count,
                  share=share,
                  rides=rides, projections=projections)
        passing = [[] for _ in cands]
        for (d, j), good in zip(flat, ok):
            if good:
                passing[d].append(j)
    counts_per = np.array([len(p) for p in passing], dtype=np.int64)
    per_row = cur.multiplicity(inv, len(distinct)) if len(cur) else counts_per * 0
    if op is not None and count:
        rep = runner.report.op(step.op, op.op)
        rep.rows_in += int((per_row * np.array([len(c) for c in cands], np.int64)).sum())
        rep.rows_out += int((per_row * counts_per).sum())
    if not materialize:
        return Joined()
    if keep is not None and set(keep) <= {*proj, alias}:
        d = np.repeat(np.arange(len(distinct)), counts_per)
        out = Joined({a: distinct[d, k].astype(ROW) for k, a in enumerate(proj)},
                     per_row[d])
        out.cols[alias] = np.array([j for p in passing for j in p], dtype=ROW)
        return out
    counts = counts_per[inv] if len(cur) else np.zeros(0, np.int64)
    total = int(counts.sum())
    partners = np.array([j for p in passing for j in p], dtype=ROW)
    offsets = np.concatenate(([0], np.cumsum(counts_per)[:-1])) if len(passing) else counts_per
    row = np.repeat(np.arange(len(cur)), counts)
    within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    out = cur.take(row)
    out.cols[alias] = partners[np.repeat(offsets[inv], counts) + within] if total else \
        np.zeros(0, ROW)
    return out


def _filter(step: JoinStep, cur: Joined, scans, ai_ops, runner: OpRunner, store: AnswerStore,
            carry: DocKV | None, chunking: Chunking) -> Joined:
    """The rows of `cur` that pass `step`'s AI predicate (over aliases already joined), asked
    once per distinct binding tuple."""
    op = ai_ops[step.op]
    bound = bound_aliases(step.op, op, scans, cur.aliases)
    distinct, inv = cur.distinct(bound)
    ok = np.array(_ask(step, op, tuple_values(step.op, op, scans, bound, distinct), runner,
                       store, carry, chunking), dtype=bool)
    keep = ok[inv] if len(cur) else np.zeros(0, bool)
    rep = runner.report.op(step.op, op.op)
    rep.rows_in += cur.size
    rep.rows_out += int(cur.weight[keep].sum()) if cur.weight is not None else int(keep.sum())
    return cur.take(np.flatnonzero(keep))


def ask_anchor_pair_ahead(step: JoinStep, nxt: JoinStep, cur: Joined,
                          scans: dict[str, ScanData], survivors: dict[str, list[int]], ai_ops,
                          runner: OpRunner, store: AnswerStore, chunking: Chunking) -> None:
    """Two joins in a row anchored on the relation the first brings in (e.g.
    reviews r2 joined to the aspects a1 the chain holds, then to the aspects a2): asked ahead
    in chunks of that relation's rows, each chunk's documents encoded once, by the first join
    that misses an answer, and held for the second (DocKV.source), instead of each join
    encoding them all. The answers wait in the store; run_joins then asks nothing again. Only
    when the second join reads just those two relations and no equality key ties them to the
    chain (then every pair it can ask depends on the chunk alone): where the plan pairs them
    (plan/strategy.shares_anchor_chunks)."""
    anchor = step.alias
    if not len(cur):
        return
    op = ai_ops[step.op]
    layout = runner.layout(op)
    rows, partners = survivors.get(anchor, []), survivors.get(nxt.alias, [])
    if not rows or not partners:
        return
    bound = bound_aliases(step.op, op, scans, cur.aliases)
    distinct, _ = cur.distinct(bound)
    held = Joined({a: distinct[:, k].astype(ROW) for k, a in enumerate(bound)})
    sample = dict(zip(bound, distinct[0].tolist()))
    by_anchor = {i: [combo_values(step.op, op, scans, {**sample, anchor: i})] for i in rows}
    for group in anchor_chunks(rows, by_anchor, layout, runner, chunking):
        kv = runner.doc_kv()
        try:
            first = expand(step, held, anchor, scans, group, ai_ops, runner, store, kv, chunking,
                           count=False, share=True)
            kept = np.unique(first.cols[anchor]) if len(first) else np.zeros(0, ROW)
            if len(kept):
                expand(nxt, Joined({anchor: kept.astype(ROW)}), nxt.alias, scans, partners,
                       ai_ops, runner, store, kv, chunking, materialize=False, count=False,
                       share=True)
        finally:
            kv.release()


def _reads(step: JoinStep, ai_ops, scans: dict[str, ScanData], aliases: list[str]) -> list[str]:
    """The aliases among `aliases` that joining `step.alias` reads: its prompt's bindings, then
    those it shares equality keys with (by name)."""
    new = scans[step.alias]
    keys = sorted(a for a in aliases if scans[a].key_columns & new.key_columns)
    bound = bound_aliases(step.op, ai_ops[step.op], scans, aliases) if step.op is not None \
        else []
    return list(dict.fromkeys(bound + keys))


def run_joins(plan: PhysicalPlan, scans: dict[str, ScanData], survivors: dict[str, list[int]],
              ai_ops, runner: OpRunner, store: AnswerStore, carry: DocKV | None = None,
              rows_needed: bool = True) -> Joined:
    """The joined rows (Joined) that satisfy every planned AI join (empty when not
    `rows_needed`: DuckDB's final statement joins them again from the answers). `carry`: the
    documents the filters left resident for the join the plan's `carry` names."""
    carry_alias = plan.carry.alias if plan.carry is not None else None
    if not plan.candidates:
        return Joined()
    best = plan.candidates[0]
    aliases = plan.relations
    rows = {a: float(len(survivors.get(a, []))) for a in aliases}
    observed = plan.replan_joins(rows) if REPLAN_FILTERS in plan.replans else None
    if observed is not None and observed.text() != best.text():
        runner.report.remarks.append(f"re-planned joins from observed survivors {rows}: "
                                     f"{observed.text()} instead of {best.text()}")
        best = observed
    first = best.start[0]
    cur = Joined({first: np.array(survivors.get(first, []), dtype=ROW)})
    joined = {first}
    steps = list(best.steps)
    while len(joined) < len(aliases):
        step = steps.pop(0)
        group = [step]
        while steps and steps[0].alias == step.alias:
            group.append(steps.pop(0))
        for n, s in enumerate(group):
            reuse = carry if s.anchor is not None and s.anchor == carry_alias else None
            if n == 0 and len(group) == 1 and steps and reuse is None and \
                    shares_anchor_chunks(plan.context, s, steps[0], joined):
                ask_anchor_pair_ahead(s, steps[0], cur, scans, survivors, ai_ops, runner,
                                      store, plan.chunking)
            if n == 0:
                last = len(joined) + 1 == len(aliases) and len(group) == 1
                keep = None if rows_needed else handoff(plan.context, s, group[1:] + steps,
                                                        joined, aliases)
                rides = ride_alongs(s, group[1:] + steps, cur, scans, survivors, ai_ops, runner,
                                    plan.context)
                cur = expand(s, cur, step.alias, scans, survivors.get(step.alias, []), ai_ops,
                              runner, store, reuse, plan.chunking,
                              materialize=rows_needed or not last,
                              rides=rides,
                              project=plan.pair_projections if last else (),
                              keep=keep)
            elif s.op is not None:
                cur = _filter(s, cur, scans, ai_ops, runner, store, reuse, plan.chunking)
            if reuse is not None:
                reuse.release()
                carry_alias = None
        joined.add(step.alias)
        if len(joined) < len(aliases) and REPLAN_JOIN in plan.replans:
            replanned = plan.replan_joins(rows, start=(frozenset(joined), float(cur.size)))
            if replanned is not None and replanned.steps:
                new_steps = list(replanned.steps)
                if [s.alias for s in new_steps] != [s.alias for s in steps]:
                    runner.report.remarks.append(
                        f"re-planned after joining {','.join(sorted(joined))} "
                        f"({cur.size} rows): {replanned.text()}")
                steps = new_steps
    return cur
