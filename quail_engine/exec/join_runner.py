"""Run a core's AI joins in the planned order, re-planning the rest after each join.

The joined set is held by column (exec/joined.Joined). Joining a relation asks its AI predicate
once per distinct pair of (the joined aliases the prompt reads, a survivor of the new relation),
restricted by the equality keys (shared k_<n> scan columns) before any prompt runs; the joined
rows then grow by index arithmetic. The pairs are asked in anchor chunks
(exec/anchor_chunks.ask_pairs); a star's anchor rows and two joins that share anchor chunks are
asked ahead, chunk by chunk, and later joins ride along a join's chunks, as the plan's turns say
(plan/join_program.py), those of an order re-planned from the rows observed included.
"""

from __future__ import annotations

import logging

import numpy as np

from quail_engine.exec.anchor_chunks import anchor_chunks, ask_pairs
from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.doc_kv import DocKV
from quail_engine.exec.join_values import bound_aliases, combo_values, pair_values, tuple_values
from quail_engine.exec.joined import ROW, Joined
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.rides import Ride, observe_rides, project_pairs
from quail_engine.exec.scans import ScanData
from quail_engine.plan.chunking import Chunking
from quail_engine.plan.join_order import JoinStep
from quail_engine.plan.join_program import PLAIN, SHARED, ChunkKV
from quail_engine.plan.physical import PhysicalPlan
from quail_engine.plan.strategy import REPLAN_FILTERS, REPLAN_JOIN

log = logging.getLogger(__name__)
def expand(step: JoinStep, cur: Joined, alias: str, scans: dict[str, ScanData],
            survivors: list[int], ai_ops, runner: OpRunner, store: AnswerStore,
            carry: DocKV | None, chunking: Chunking, materialize: bool = True,
            count: bool = True, chunk_kv: ChunkKV = PLAIN, rides: list[Ride] = (),
            project: list[int] = (), keep: frozenset[str] | None = None) -> Joined:
    """`cur` joined with `alias`'s survivors: pairs restricted by the equality keys (shared
    k_<n> scan columns), then by `step`'s AI predicate, asked once per distinct binding pair.
    Without `materialize` (the last join, when nothing reads the joined rows) the rows are
    counted, not built: an empty Joined. Without `count`, the report is left alone and the
    operator not marked complete (a join asked ahead for some rows; run_joins asks the rest and
    counts every row later). `chunk_kv`: the plan's KV lifetimes inside the anchor chunks
    (a turn's `kv`; plan/join_program.ChunkKV), whether `carry`'s documents stay there for a
    later join among them.
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
        ok = ask_pairs(step, op, values, runner, store, carry, chunking, every_pair=count,
                       chunk_kv=chunk_kv, rides=rides, projections=projections)
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
    ok = np.array(ask_pairs(step, op, tuple_values(step.op, op, scans, bound, distinct), runner,
                       store, carry, chunking), dtype=bool)
    keep = ok[inv] if len(cur) else np.zeros(0, bool)
    rep = runner.report.op(step.op, op.op)
    rep.rows_in += cur.size
    rep.rows_out += int(cur.weight[keep].sum()) if cur.weight is not None else int(keep.sum())
    return cur.take(np.flatnonzero(keep))


def ask_anchor_pair_ahead(step: JoinStep, nxt: JoinStep, cur: Joined,
                          scans: dict[str, ScanData], survivors: dict[str, list[int]], ai_ops,
                          runner: OpRunner, store: AnswerStore, chunking: Chunking,
                          chunk_kv: ChunkKV = SHARED) -> None:
    """Two joins in a row anchored on the relation the first brings in (e.g.
    reviews r2 joined to the aspects a1 the chain holds, then to the aspects a2): asked ahead
    in chunks of that relation's rows, each chunk's documents encoded once, by the first join
    that misses an answer, and held for the second (DocKV.source), instead of each join
    encoding them all. The answers wait in the store; run_joins then asks nothing again. Only
    when the second join reads just those two relations and no equality key ties them to the
    chain (then every pair it can ask depends on the chunk alone): where the plan pairs them
    (a turn's `paired`: plan/join_program.py), both asks with the turn's `ahead_kv`."""
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
                           count=False, chunk_kv=chunk_kv)
            kept = np.unique(first.cols[anchor]) if len(first) else np.zeros(0, ROW)
            if len(kept):
                expand(nxt, Joined({anchor: kept.astype(ROW)}), nxt.alias, scans, partners,
                       ai_ops, runner, store, kv, chunking, materialize=False, count=False,
                       chunk_kv=chunk_kv)
        finally:
            kv.release()


def ask_star_in_chunks(plan: PhysicalPlan, scans: dict[str, ScanData],
                       survivors: dict[str, list[int]], ai_ops, runner: OpRunner,
                       store: AnswerStore) -> None:
    """A star of AI joins (the plan's `star`) whose documents no filter left resident (every
    review joined to the aspects twice): the anchor relation's rows in
    chunks, each chunk asked every join in turn, its documents encoded once, by the first
    join that misses an answer, and held for the next (DocKV.source), the answers left in
    the store (run_joins then asks nothing again), instead of each join encoding them
    all."""
    anchor = plan.star_chunks
    if anchor is None:
        return
    steps = plan.candidates[0].steps
    star_kv = plan.joins.star_kv if plan.joins is not None else None
    star_kv = star_kv if star_kv is not None else SHARED
    rows_of = {a: survivors.get(a, list(range(len(scans[a].rows))))
               for a in (anchor, *(s.alias for s in steps))}
    if not all(rows_of.values()):
        return
    first = steps[0]
    op = ai_ops[first.op]
    layout = runner.layout(op)
    partner = rows_of[first.alias][0]
    by_anchor = {i: [combo_values(first.op, op, scans, {anchor: i, first.alias: partner})]
                 for i in rows_of[anchor]}
    for group in anchor_chunks(list(by_anchor), by_anchor, layout, runner,
                               plan.chunking):
        kv = runner.doc_kv()
        try:
            cur = Joined({anchor: np.array(group, dtype=ROW)})
            for n, step in enumerate(steps):
                cur = expand(step, cur, step.alias, scans, rows_of[step.alias],
                             ai_ops, runner, store, kv,
                             materialize=n + 1 < len(steps), count=False,
                             chunk_kv=star_kv, chunking=plan.chunking)
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
    `rows_needed`: DuckDB's final statement joins them again from the answers), the plan's
    turns taken in order (`plan.joins`), re-planned where the plan says from the rows observed
    (`replan_joins`: the turns of the order it chooses). `carry`: the documents the filters left
    resident for the join the plan's `carry` names."""
    program = plan.joins
    if not plan.candidates or program is None:
        return Joined()
    carried = plan.carry.alias if plan.carry is not None else None
    rows = {a: float(len(survivors.get(a, []))) for a in plan.relations}
    observed = plan.replan_joins(rows, carried=carried) if REPLAN_FILTERS in plan.replans \
        else None
    if observed is not None and observed is not program:
        _replanned(runner, f"re-planned joins from observed survivors {rows}: "
                           f"{observed.text()} instead of {program.text()}")
        program = observed
    first = program.order.start[0]
    cur = Joined({first: np.array(survivors.get(first, []), dtype=ROW)})
    turns = list(program.turns)
    while turns:
        turn = turns.pop(0)
        alias = turn.step.alias
        for n, s in enumerate(turn.steps):
            reuse = carry if n == turn.carry_at else None
            if n == 0 and turn.paired is not None:
                ask_anchor_pair_ahead(s, turn.paired, cur, scans, survivors, ai_ops, runner,
                                      store, plan.chunking, turn.ahead_kv)
            if n == 0:
                rides = observe_rides(turn.rides, cur, scans, survivors, ai_ops, runner)
                cur = expand(s, cur, alias, scans, survivors.get(alias, []), ai_ops, runner,
                             store, reuse, plan.chunking,
                             materialize=rows_needed or not turn.is_last,
                             chunk_kv=turn.kv, rides=rides,
                             project=turn.projections,
                             keep=None if rows_needed else turn.handoff)
            elif s.op is not None:
                cur = _filter(s, cur, scans, ai_ops, runner, store, reuse, plan.chunking)
            if reuse is not None:
                reuse.release()
                carried = None
        if turns and REPLAN_JOIN in plan.replans:
            joined = turn.joined | {alias}
            replanned = plan.replan_joins(rows, start=(joined, float(cur.size)),
                                          carried=carried)
            if replanned is not None and replanned.turns:
                if [t.text() for t in replanned.turns] != [t.text() for t in turns]:
                    _replanned(runner, f"re-planned after joining {','.join(sorted(joined))} "
                                       f"({cur.size} rows): {replanned.text()}")
                turns = list(replanned.turns)
    return cur


def _replanned(runner: OpRunner, remark: str) -> None:
    """A re-planned program, as the report and the log show it (`quail explain --analyze`)."""
    log.info(remark)
    runner.report.remarks.append(remark)
