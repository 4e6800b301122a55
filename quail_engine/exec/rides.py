"""Asking ahead over a join's resident anchor chunks: a later join of the chain whose anchor
documents are this join's (Ride), and an AI projection over the pairs the core's last join keeps
(PairProjection). Both store their answers; their own turn then asks nothing again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.doc_kv import DocKV
from quail_engine.exec.join_values import pair_values
from quail_engine.exec.joined import Joined
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.scans import ScanData
from quail_engine.plan.riding import PlannedRide, RideSeen


@dataclass
class Ride:
    """A later join the plan lets ride along this join's anchor chunks (`planned`: another alias
    of the same table, reviews r2, which the chain's first join reads as r1), asked over each
    chunk of this join's anchors while their KV is resident, ahead of its turn, for the rows it
    may read then: its anchor relation's rows with those documents x its partner's candidates.
    Its answers wait in the store; its own turn then asks nothing again. `seen`: what it
    observed of them, the inputs to the plan's decision at each chunk."""

    planned: PlannedRide
    op: object
    layout: object
    partners: list[int]  # the partner's candidate rows
    rows_of: dict[str, list[int]]  # anchor document text -> the anchor alias's rows with it
    scans: dict
    seen: RideSeen

    @property
    def op_id(self) -> int:
        return self.planned.op

    def values(self, texts: list[str]) -> list[tuple]:
        rows = [i for t in dict.fromkeys(texts) for i in self.rows_of.get(t, ())]
        pairs = [(d, j) for d in range(len(rows)) for j in self.partners]
        return pair_values(self.op_id, self.op, self.scans, [self.planned.anchor],
                           [[i] for i in rows], self.planned.partner, pairs)

    def worth(self, asked: int, passed: int) -> bool:
        """Whether it rides once `passed` of the `asked` pairs of the join it rides along passed:
        the plan's decision at this observation point (PlannedRide.is_worth)."""
        return self.planned.is_worth(self.seen, asked, passed)


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


def ask_dropped(rides: list[Ride], asked: int, passed: int, hold: DocKV, texts: list[str],
                runner: OpRunner, store: AnswerStore) -> None:
    """Each of `rides` worth it once `passed` of the `asked` pairs of the join they ride along
    passed (before any: by the plan's estimate), asked over the
    documents `texts` that a filter chunk dropped while `hold` keeps them resident (the plan's
    `dropped_rides`): their anchor alias still reads them, and would encode them again at its
    turn."""
    for ride in rides:
        if not ride.worth(asked, passed):
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
    """PairProjection of each op of `ops` (the plan's turn says the join holds every relation
    it reads: `proj` and `alias`), over the pairs `flat` whose join values are `values`."""
    out = []
    for op_id in ops:
        op = ai_ops[op_id]
        mine = pair_values(op_id, op, scans, proj, bound, alias, flat)
        out.append(PairProjection(op_id, op, runner.layout(op), dict(zip(values, mine))))
    return out


def ask_projection(pr: PairProjection, values: list[tuple], runner: OpRunner,
                   store: AnswerStore) -> None:
    """`pr`'s `values` (a chunk's kept pairs) asked now, counted as its rows
    (OpRunner.project)."""
    runner.project(pr.op_id, pr.layout, values, store)


def observe_rides(planned: Sequence[PlannedRide], cur: Joined, scans: dict[str, ScanData],
                  survivors: dict[str, list[int]], ai_ops, runner: OpRunner) -> list[Ride]:
    """The Ride of each of the plan's `planned` rides that has rows to ask: its anchor's
    survivors (in `cur` once joined) x its partner's candidates, with what the plan decides by
    at each chunk (RideSeen: their counts, the characters of its documents and questions)."""
    out: list[Ride] = []
    for p in planned:
        anchor, partner = p.anchor, p.partner
        op = ai_ops[p.op]
        layout = runner.layout(op)
        candidates = {a: (np.unique(cur.cols[a]).tolist() if a in cur.aliases
                          else list(survivors.get(a, []))) for a in (anchor, partner)}
        rows, partners = candidates[anchor], candidates[partner]
        if not rows or not partners:
            continue
        sample = pair_values(p.op, op, scans, [anchor], [[i] for i in rows], partner,
                             [(d, partners[d % len(partners)]) for d in range(len(rows))])
        rows_of: dict[str, list[int]] = {}
        questions = 0
        for i, v in zip(rows, sample):
            prefix, suffix = layout.texts(v)
            rows_of.setdefault(prefix, []).append(i)
            questions += len(suffix)
        seen = RideSeen({a: len(c) for a, c in candidates.items()}, sum(map(len, rows_of)),
                        questions, len(partners))
        out.append(Ride(p, op, layout, partners, rows_of, scans, seen))
    return out
