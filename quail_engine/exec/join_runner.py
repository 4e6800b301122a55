"""Run a core's AI joins in the planned order, re-planning the rest after each join.

Candidate pairs are the surviving rows of the joined set times the new relation's survivors,
restricted by the equality keys (shared k_<n> scan columns) before any prompt runs. Pairs are
grouped by anchor document; a chunk of anchors is encoded once (KV resident) while all their
partners run, then released.
"""

from __future__ import annotations

import logging
from functools import partial

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.doc_kv import DocKV
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.scans import ScanData
from quail_engine.plan.join_order import JoinStep
from quail_engine.plan.physical import PhysicalPlan
from quail_engine.sql.ir import binding_column

log = logging.getLogger(__name__)
ANCHORS_PER_CHUNK = 128


def combo_values(op_id: int, op, scans: dict[str, ScanData], row: dict[str, int]) -> tuple:
    out = []
    for i in range(len(op.bindings)):
        col = binding_column(op_id, i)
        alias = next(a for a in row if col in scans[a].columns)
        out.append(scans[alias].rows[row[alias]][col])
    return tuple(out)


def _candidates(cur: list[dict[str, int]], alias: str, scans: dict[str, ScanData],
                survivors: list[int]) -> list[dict[str, int]]:
    new = scans[alias]
    joined = list(cur[0]) if cur else []
    keys_by = {a: sorted(scans[a].key_columns & new.key_columns) for a in joined}
    keys_by = {a: k for a, k in keys_by.items() if k}
    if not keys_by:
        return [{**r, alias: j} for r in cur for j in survivors]
    index: dict[tuple, list[int]] = {}
    for j in survivors:
        k = tuple(new.key(j, keys) for _, keys in sorted(keys_by.items()))
        if all(None not in part for part in k):
            index.setdefault(k, []).append(j)
    out = []
    for r in cur:
        k = tuple(scans[a].key(r[a], keys) for a, keys in sorted(keys_by.items()))
        out += [{**r, alias: j} for j in index.get(k, ())]
    return out


def _run_ai_step(step: JoinStep, pairs: list[dict[str, int]], scans, ai_ops, runner: OpRunner,
                 store: AnswerStore, carry: DocKV | None = None) -> list[dict[str, int]]:
    op = ai_ops[step.op]
    layout = runner.layout(op, anchor=step.anchor)
    rep = runner.report.op(step.op, op.op)
    values = [combo_values(step.op, op, scans, p) for p in pairs]
    need = store.missing(step.op, values)
    by_anchor: dict[tuple, list[tuple]] = {}  # anchor's binding values -> its pairs
    slots = layout.doc_slots
    for v in need:
        if any(x is None for x in v):
            store.put(step.op, v, None)
            continue
        by_anchor.setdefault(tuple(v[i] for i in slots), []).append(v)
    anchors = list(by_anchor)
    for c in range(0, len(anchors), ANCHORS_PER_CHUNK):
        chunk = [v for a in anchors[c:c + ANCHORS_PER_CHUNK] for v in by_anchor[a]]
        kv = runner.doc_kv(private=carry is None)
        if carry is not None:  # the anchors' documents, as the filters left them resident
            kv.take(carry, [layout.texts(by_anchor[a][0])[0]
                            for a in anchors[c:c + ANCHORS_PER_CHUNK]])
        try:
            store.fill(step.op, chunk, partial(runner.answer, step.op, layout, kv=kv,
                                               release_done=True))
        finally:
            kv.release()
    store.complete.add(step.op)  # every candidate pair was asked
    kept = [p for p, v in zip(pairs, values) if op.passes(store.get(step.op, v))]
    rep.rows_in += len(pairs)
    rep.rows_out += len(kept)
    return kept


def run_joins(plan: PhysicalPlan, scans: dict[str, ScanData], survivors: dict[str, list[int]],
              ai_ops, runner: OpRunner, store: AnswerStore, carry: DocKV | None = None
              ) -> list[dict[str, int]]:
    """Joined rows (alias -> scan row index) that satisfy every planned AI join. `carry`: the
    documents the filters left resident for the join the plan's `carry` names."""
    carry_alias = plan.carry.alias if plan.carry is not None else None
    if not plan.candidates:
        return []
    best = plan.candidates[0]
    aliases = plan.relations
    rows = {a: float(len(survivors.get(a, []))) for a in aliases}
    observed = plan.replan_joins(rows)  # the filters' real survivors
    if observed is not None and observed.text() != best.text():
        runner.report.remarks.append(f"re-planned joins from observed survivors {rows}: "
                                     f"{observed.text()} instead of {best.text()}")
        best = observed
    first = best.start[0]
    cur = [{first: i} for i in survivors.get(first, [])]
    joined = {first}
    steps = list(best.steps)
    while len(joined) < len(aliases):
        step = steps.pop(0)
        group = [step]
        while steps and steps[0].alias == step.alias:
            group.append(steps.pop(0))
        pairs = _candidates(cur, step.alias, scans, survivors.get(step.alias, []))
        for s in group:
            reuse = carry if s.anchor is not None and s.anchor == carry_alias else None
            pairs = pairs if s.op is None else _run_ai_step(s, pairs, scans, ai_ops, runner,
                                                            store, reuse)
            if reuse is not None:
                reuse.release()
                carry_alias = None
        cur = pairs
        joined.add(step.alias)
        if len(joined) < len(aliases):
            replanned = plan.replan_joins(rows, start=(frozenset(joined), float(len(cur))))
            if replanned is not None and replanned.steps:
                new_steps = list(replanned.steps)
                if [s.alias for s in new_steps] != [s.alias for s in steps]:
                    runner.report.remarks.append(
                        f"re-planned after joining {','.join(sorted(joined))} "
                        f"({len(cur)} rows): {replanned.text()}")
                steps = new_steps
    return cur
