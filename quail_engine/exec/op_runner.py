"""Answers for one AI operator over many rows: cache first, then the engine in batches.

Rows are tuples of binding values. A NULL value gives a NULL answer without a prompt. Shared
layouts put the document into a prefix whose KV lives in a DocKV (the caller's, when the plan
keeps it across steps; otherwise a local one for documents used more than once in this call).
Answers reach the cache after every batch, so an interrupted run keeps what it computed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from quail_engine.errors import ExecutionError
from quail_engine.exec.answer_cache import AnswerCache, answer_key
from quail_engine.exec.doc_kv import DocKV
from quail_engine.exec.prompts import OpPrompt, sql_value
from quail_engine.exec.report import Report
from quail_engine.exec.tasks import check_supported
from quail_engine.infer.api import Answer, GenerateReadout, Request
from quail_engine.plan.cost import request_work

log = logging.getLogger(__name__)
QUESTION_RESERVE = 256  # tokens kept free for the question when a document is cut


class OpRunner:
    def __init__(self, engine, cache: AnswerCache, report: Report, progress=None,
                 on_long: str = "truncate", calibrate: bool = True, batch_size: int = 256):
        if on_long not in ("truncate", "error"):
            raise ValueError(f"on_long must be 'truncate' or 'error', got {on_long!r}")
        self.engine, self.cache, self.report = engine, cache, report
        self.progress, self.on_long, self.calibrate = progress, on_long, calibrate
        self.batch_size = batch_size
        self.share_kv = True
        self._calibration: dict[tuple, list[int]] = {}

    def doc_kv(self) -> DocKV:
        return DocKV(self.engine, max(16, self.engine.max_context - QUESTION_RESERVE),
                     self.on_long)

    def readout(self, layout: OpPrompt):
        if not self.calibrate or layout.op.op not in ("ai_filter", "ai_join", "ai_score",
                                                      "ai_classify"):
            return layout.readout()
        key = (layout.op.template, layout.doc_slots, layout.op.op,
               tuple(lb.name for lb in layout.op.labels or ()))
        if key not in self._calibration:
            head, tail = self.engine.chat_split(*layout.texts(layout.calibration_values()))
            self._calibration[key] = head + tail
        return layout.readout(self._calibration[key])

    def answer(self, op_id: int, layout: OpPrompt, rows: Sequence[Sequence[object]],
               kv: DocKV | None = None, unplanned: bool = False) -> list[object]:
        """SQL values for `rows` (aligned); NULL in any binding gives NULL."""
        rep = self.report.op(op_id, layout.op.op)
        check_supported(layout.op)
        if layout.op.op == "ai_count_tokens":
            return self._count_tokens(layout, rows)
        start = time.perf_counter()
        readout = self.readout(layout)
        out: list[object] = [None] * len(rows)
        texts: dict[int, tuple[str, str]] = {}
        for i, values in enumerate(rows):
            if any(v is None for v in values):
                rep.nulls += 1
            else:
                texts[i] = layout.texts(values)
        keys = {i: answer_key(self.engine.model_id, p + s, readout) for i, (p, s) in texts.items()}
        cached = self.cache.get_many(keys.values())
        rep.cache_hits += len(cached)
        todo: list[int] = []
        for i, key in keys.items():
            if key in cached:
                out[i] = cached[key]
            else:
                todo.append(i)
        if unplanned:
            rep.unplanned += len(todo)
        prefixes = [texts[i][0] for i in todo]
        own_kv = (kv is None and layout.is_shared and self.share_kv
                  and len(set(prefixes)) < len(prefixes))  # some document is asked twice
        if own_kv:
            kv = self.doc_kv()
        try:
            for b in range(0, len(todo), self.batch_size):
                batch = todo[b:b + self.batch_size]
                answers = self._run_batch(layout, readout, [texts[i] for i in batch], kv, rep)
                values = {keys[i]: sql_value(layout.op, a) for i, a in zip(batch, answers)}
                self.cache.put_many(values)
                for i in batch:
                    out[i] = values[keys[i]]
                if self.progress is not None:
                    self.progress.advance(len(batch), self.report.fresh_tokens)
        finally:
            if own_kv and kv is not None:
                kv.release()
            rep.seconds += time.perf_counter() - start
        rep.prompts += len(texts)
        return out

    def _count_tokens(self, layout: OpPrompt, rows: Sequence[Sequence[object]]) -> list[object]:
        texts = [None if any(v is None for v in r) else layout.texts(r)[0] for r in rows]
        counts = self.engine.tokenize([t for t in texts if t is not None])
        it = iter(counts)
        return [None if t is None else len(next(it)) for t in texts]

    def _run_batch(self, layout: OpPrompt, readout, texts: list[tuple[str, str]],
                   kv: DocKV | None, rep) -> list[Answer]:
        stats = self.engine.stats
        fresh0, req0 = stats.fresh_tokens, stats.requested_tokens
        reserve = readout.max_tokens if isinstance(readout, GenerateReadout) else 1
        requests: list[Request] = []
        kv_hits = 0
        if layout.is_shared and kv is not None and self.share_kv:
            before = kv.truncated
            resident = set(kv.handles)
            kv.ensure([p for p, _ in texts])
            rep.truncated += kv.truncated - before
            encoded_now: set[str] = set()
            for p, s in texts:
                handle = kv.get(p)
                if p in resident or p in encoded_now:
                    kv_hits += handle.num_tokens
                encoded_now.add(p)
                _, tail = self.engine.chat_split(p, s)
                tail = self._fit(tail, self.engine.max_context - handle.num_tokens - reserve, rep)
                requests.append(Request(tuple(tail), readout, handle))
                rep.work = rep.work + request_work(handle.num_tokens, len(tail), False)
            rep.work = rep.work + kv.take_work()
        else:
            for p, s in texts:
                head, tail = self.engine.chat_split(p, s)
                tokens = self._fit(head + tail, self.engine.max_context - reserve, rep)
                requests.append(Request(tuple(tokens), readout))
                rep.work = rep.work + request_work(0, len(tokens), False)
        answers = self.engine.run(requests)
        rep.fresh_tokens += stats.fresh_tokens - fresh0
        rep.requested_tokens += stats.requested_tokens - req0
        rep.kv_hit_tokens += kv_hits
        return answers

    def _fit(self, tokens: list[int], limit: int, rep) -> list[int]:
        if len(tokens) <= limit:
            return tokens
        if self.on_long == "error":
            raise ExecutionError(f"a prompt of {len(tokens)} tokens exceeds the model's context "
                                 f"of {self.engine.max_context} tokens (on_long='error')")
        rep.truncated += 1
        keep_tail = min(len(tokens), max(1, limit // 2))
        return tokens[:max(0, limit - keep_tail)] + tokens[len(tokens) - keep_tail:]

