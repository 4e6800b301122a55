"""Ask an AI join's distinct binding pairs in anchor chunks: the pairs grouped by anchor
document, a chunk of anchors (as the plan's chunking bounds them) encoded once while all their
partners run, the later joins riding along and the projections over its kept pairs asked while
the chunk is resident, the next chunk's call prepared on a helper thread meanwhile."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.doc_kv import DocKV, kv_capacity_tokens, kv_page_tokens
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.rides import (
    PairProjection,
    Ride,
    ask_projection,
    ask_riding,
    prepare_ride,
)
from quail_engine.plan.chunking import Chunking
from quail_engine.plan.join_order import JoinStep
from quail_engine.plan.join_program import PLAIN, SHARE, ChunkKV


def ask_pairs(step: JoinStep, op, values: list[tuple], runner: OpRunner, store: AnswerStore,
         carry: DocKV | None, chunking: Chunking, every_pair: bool = True,
         chunk_kv: ChunkKV = PLAIN, rides: list[Ride] = (), projections: list[PairProjection] = ()) -> list[bool]:
    """Answer `values` (distinct binding tuples) of the AI join `step`, anchors grouped so that
    a chunk of them (the plan's `chunking`) is encoded once while all its partners run; ->
    whether each passes.
    `every_pair`: these are all the pairs the join will ask (the operator is then complete).
    `chunk_kv`: the plan's KV lifetimes inside each chunk (plan/join_program.ChunkKV): whether
    the chunk's documents are held for the rides and projections, whether the join's own KV is
    private, and whether the anchors' documents stay in `carry` for a later join or move out.
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
            # the later joins the plan says ride along at this chunk, given the rows this join
            # kept so far (PlannedRide.is_worth), their pairs prepared on the helper while the
            # engine runs this join's (else the engine waits for that host work on every call)
            riding = [(r, helper.submit(prepare_ride, r, texts, runner, store))
                      for r in rides if r.worth(asked, passed)]
            for r, _ in riding:
                note = (f"join #{r.op_id} was asked over join #{step.op}'s anchor documents "
                        "while they were resident")
                if note not in runner.report.remarks:
                    runner.report.remarks.append(note)
            share = chunk_kv.handed == SHARE
            hold = None  # the chunk's plain document KV, for this join and those riding along
            if chunk_kv.holds and (riding or projections):
                hold = runner.doc_kv()
                if carry is not None:
                    (hold.share if share else hold.take)(carry, texts)
            kv = runner.doc_kv(private=chunk_kv.private)  # (its question stem extends it)
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
        sizes = chunking.anchor_chunks(capacity, [len(sizer.heads[t]) for t in texts],
                                       kv_page_tokens(runner.engine))
    out, c = [], 0
    for n in sizes:
        out.append(anchors[c:c + n])
        c += n
    return out
