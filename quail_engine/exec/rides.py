"""Asking ahead over a join's resident anchor chunks: a later join of the chain whose anchor
documents are this join's (Ride), and an AI projection over the pairs the core's last join keeps
(PairProjection). Both store their answers; their own turn then asks nothing again."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.doc_kv import DocKV
from quail_engine.exec.join_values import pair_values
from quail_engine.exec.joined import Joined
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.scans import ScanData
from quail_engine.plan.context import PlanContext
from quail_engine.plan.join_order import JoinStep
from quail_engine.plan.riding import is_ride_worth, ride_partners
from quail_engine.sql.ir import binding_column


@dataclass
class Ride:
    """A later join of the chain whose anchor documents are this join's (another alias of the
    same table: reviews r2, which the chain's first join reads as r1), asked
    over each chunk of this join's anchors while their KV is resident, ahead of its turn, for
    the rows it may read then: its anchor relation's rows with those documents x its partner's
    candidates. Its answers wait in the store; its own turn then asks nothing again."""

    op_id: int
    op: object
    layout: object
    anchor: str          # the later join's anchor alias (its rows have the documents)
    partner: str
    partners: list[int]  # the partner's candidate rows
    rows_of: dict[str, list[int]]  # anchor document text -> the anchor alias's rows with it
    scans: dict
    steps: list[JoinStep]  # this join, the joins between, the riding join
    joined: frozenset      # the aliases joined before this join
    candidates: dict[str, int]  # the two aliases' candidate rows now
    documents: int  # characters of the documents (each once)
    questions: int  # characters of the questions, one per anchor row

    def values(self, texts: list[str]) -> list[tuple]:
        rows = [i for t in dict.fromkeys(texts) for i in self.rows_of.get(t, ())]
        pairs = [(d, j) for d in range(len(rows)) for j in self.partners]
        return pair_values(self.op_id, self.op, self.scans, [self.anchor], [[i] for i in rows],
                           self.partner, pairs)

    def worth(self, rows_out: float) -> bool:
        """Whether it rides when this join keeps `rows_out` rows (plan/riding.py)."""
        return is_ride_worth((self.anchor, self.partner), self.steps, self.joined,
                             self.candidates, rows_out, self.documents, self.questions,
                             len(self.partners))


def prepare_ride(ride: Ride, texts: list[str], runner: OpRunner, store: AnswerStore):
    """(`ride`'s pairs over the documents `texts` with no answer yet, their call prepared)."""
    need = store.missing(ride.op_id, ride.values(texts))
    return need, runner.prepare(ride.layout, need) if need else None


def ask_riding(ride: Ride, values: list[tuple], prep, hold: DocKV, texts: list[str],
               runner: OpRunner, store: AnswerStore) -> None:
    """`ride`'s `values` over the documents `hold` keeps for this chunk (each question's own
    stem extends them in a private DocKV, as the chunk's own join's does)."""
    if not values:
        return
    prep = runner.refreshed(prep)  # (a ride asking this chunk's join's question: answered)
    kv = runner.doc_kv(private=True)
    kv.share(hold, texts)
    try:
        for v, a in zip(values, runner.answer(ride.op_id, ride.layout, values, kv=kv,
                                              release_done=True, prep=prep)):
            store.put(ride.op_id, v, a)
    finally:
        kv.release()


def ask_dropped(rides: list[Ride], kept: float, hold: DocKV, texts: list[str], runner: OpRunner,
                store: AnswerStore) -> None:
    """Each of `rides` worth it when the join they ride along keeps `kept` rows, asked over the
    documents `texts` that a filter chunk dropped while `hold` keeps them resident (the plan's
    `dropped_rides`): their anchor alias still reads them, and would encode them again at its
    turn."""
    for ride in rides:
        if not ride.worth(kept):
            continue
        need, prep = prepare_ride(ride, texts, runner, store)
        if not need:
            continue
        note = (f"join #{ride.op_id} was asked over the documents the filters dropped while "
                "they were resident")
        if note not in runner.report.remarks:
            runner.report.remarks.append(note)
        ask_riding(ride, need, prep, hold, texts, runner, store)


@dataclass
class PairProjection:
    """An AI projection over the pairs the core's last join keeps (e.g. the
    sentiment toward the aspect each critical review was joined with), asked for each chunk's
    passing pairs while the chunk's anchor documents are resident: its prompts begin with the
    document, so they read its pages through the prefix cache instead of encoding it again
    after the join released it. `of`: the join's binding values of a pair -> the
    projection's."""

    op_id: int
    op: object
    layout: object
    of: dict[tuple, tuple]

    def values(self, chunk: list[tuple], answers: list[object], join_op) -> list[tuple]:
        return list(dict.fromkeys(self.of[v] for v, a in zip(chunk, answers)
                                  if join_op.passes(a) and v in self.of))


def project_pairs(ops: list[int], ai_ops, scans: dict[str, ScanData], proj: list[str],
                  bound: list[list[int]], alias: str, flat: list[tuple[int, int]],
                  values: list[tuple], runner: OpRunner) -> list[PairProjection]:
    """PairProjection of each op of `ops` that reads only the join's aliases (`proj` and
    `alias`), over the pairs `flat` whose join values are `values`."""
    out = []
    held = [*proj, alias]
    for op_id in ops:
        op = ai_ops[op_id]
        if not _holds(op_id, op, scans, held):
            continue  # it reads a relation this join does not hold
        mine = pair_values(op_id, op, scans, proj, bound, alias, flat)
        out.append(PairProjection(op_id, op, runner.layout(op), dict(zip(values, mine))))
    return out


def ask_projection(pr: PairProjection, values: list[tuple], runner: OpRunner,
                   store: AnswerStore) -> None:
    """`pr`'s `values` (a chunk's kept pairs) asked now, counted as its rows
    (OpRunner.project)."""
    runner.project(pr.op_id, pr.layout, values, store)


def _holds(op_id: int, op, scans: dict[str, ScanData], aliases) -> bool:
    """Whether every binding of `op` is a column of one of `aliases`' scans."""
    return all(any(binding_column(op_id, i) in scans[a].columns for a in aliases)
               for i in range(len(op.bindings)))


def ride_alongs(step: JoinStep, later: list[JoinStep], cur: Joined, scans: dict[str, ScanData],
                survivors: dict[str, list[int]], ai_ops, runner: OpRunner, ctx: PlanContext
                ) -> list[Ride]:
    """Ride of each later join (`later`: the plan's remaining steps) the plan lets ride along
    `step`'s anchor chunks (plan/riding.ride_partners) that has rows to ask: its anchor's
    survivors x its partner's candidates. Whether one rides is decided chunk by chunk from the
    rows `step` keeps (Ride.worth)."""
    ahead = [step, *later]
    out: list[Ride] = []
    for k, anchor, partner in ride_partners(ctx, step, later, frozenset(cur.aliases)):
        late = later[k]
        op = ai_ops[late.op]
        layout = runner.layout(op)
        candidates = {a: (np.unique(cur.cols[a]).tolist() if a in cur.aliases
                          else list(survivors.get(a, []))) for a in (anchor, partner)}
        rows, partners = candidates[anchor], candidates[partner]
        if not rows or not partners:
            continue
        sample = pair_values(late.op, op, scans, [anchor], [[i] for i in rows], partner,
                             [(d, partners[d % len(partners)]) for d in range(len(rows))])
        rows_of: dict[str, list[int]] = {}
        questions = 0
        for i, v in zip(rows, sample):
            prefix, suffix = layout.texts(v)
            rows_of.setdefault(prefix, []).append(i)
            questions += len(suffix)
        out.append(Ride(late.op, op, layout, anchor, partner, partners, rows_of, scans,
                        ahead[:k + 2], frozenset(cur.aliases),
                        {a: len(c) for a, c in candidates.items()},
                        sum(map(len, rows_of)), questions))
    return out
