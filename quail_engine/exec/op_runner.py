"""Answers for one AI operator over many rows: cache first, then the engine in batches.

OpRunner coordinates a call: its host preparation (prompts, readout, cached answers:
exec/call_prep.py), the operators put together from several requests per row
(exec/multi_request.py), an aggregate's map-reduce past the context (exec/aggregate.py), and
the batches through the engine (exec/batch_pipeline.py, sized by exec/batch_sizing.py), whose
answers reach the cache after every batch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from quail_engine.exec import engine_thread
from quail_engine.exec.aggregate import list_slot, map_reduce
from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.batch_pipeline import BatchPipeline
from quail_engine.exec.batch_sizing import BatchSizer
from quail_engine.exec.call_prep import CallPrep, CallPreparer
from quail_engine.exec.doc_kv import DocKV
from quail_engine.exec.multi_request import answer_aspects, answer_labels, answer_similarity
from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.prompts import OpPrompt, is_decoded, warn_if_weak
from quail_engine.exec.report import Report
from quail_engine.exec.tasks import check_supported
from quail_engine.infer.api import Answer, GenerateReadout
from quail_engine.infer.radix import PrefixCounter
from quail_engine.plan.call_order import CACHED_FIRST, held_first
from quail_engine.plan.chunking import map_chunk_tokens
from quail_engine.plan.cost import ModelSpec
from quail_engine.sql.op_kinds import spec

QUESTION_RESERVE = 256  # tokens kept free for the question when a document is cut


def answer_length(readout, cap: int | None) -> int:
    """The context a prompt leaves for its answer: the tokens it may generate, within `cap` (the
    session's cap on every generated answer), else the one token it is read from."""
    if not isinstance(readout, GenerateReadout):
        return 1
    return min(readout.max_tokens, cap) if isinstance(cap, int) else readout.max_tokens


class OpRunner(CallPreparer):
    """Answers AI operators' rows on `engine`, cache first. `text`: the PromptText prompts are
    tokenized through (default: the engine's tokenizer). `precision`: part of the answers'
    identity (fp8 answers are not bf16 answers). `batch_size`: prompts per engine batch at
    most (exec/batch_sizing.py). `decoder`: an OpRunner over another model that writes the
    generative operators' text (None: this one)."""

    def __init__(self, engine, cache: AnswerCache, report: Report, progress=None,
                 on_long: str = "truncate", calibrate: bool = True, batch_size: int = 65536,
                 text: PromptText | None = None, precision: str = ""):
        if on_long not in ("truncate", "error"):
            raise ValueError(f"on_long must be 'truncate' or 'error', got {on_long!r}")
        self.engine, self.report = engine, report
        super().__init__(cache, text or PromptText.of_engine(lambda: self.engine), calibrate,
                         precision)
        self.progress, self.on_long = progress, on_long
        self.sizer = BatchSizer(batch_size)
        self.share_kv = True
        self.call_order = CACHED_FIRST  # the plan's (plan/call_order.py), as the core sets it
        # op -> its aggregate step's map chunk (plan/physical.aggregate_step), as the cores set it
        self.map_chunks: dict[int, int] = {}
        self.decoder: OpRunner | None = None
        self._minimums: dict[int, PrefixCounter] = {}  # per operator, across its calls

    def loaded_engine(self):
        """The engine if it is loaded, else None (loads nothing)."""
        return self.engine

    def doc_kv(self, private: bool = False) -> DocKV:
        """A DocKV over this runner's engine; `private`: read by one operator alone (DocKV)."""
        return DocKV(lambda: self.engine, QUESTION_RESERVE, self.on_long, self.text, private)

    def project(self, op_id: int, layout: OpPrompt, values: Sequence[Sequence[object]],
                store, kv: DocKV | None = None) -> None:
        """An AI projection's `values`: those `store` has no answer for are answered in one
        call and stored, and counted as the operator's rows in and out (values another call
        answered, a CTE's classification the outer core asked as its label filter or a pair
        asked while the join held its document, are not counted again)."""
        asked = sum(1 for v in values if not store.has(op_id, v))
        store.fill(op_id, values, lambda need: self.answer(op_id, layout, need, kv=kv))
        rep = self.report.op(op_id, layout.op.op)
        rep.rows_in += asked
        rep.rows_out += asked

    def answer(self, op_id: int, layout: OpPrompt, rows: Sequence[Sequence[object]],
               kv: DocKV | None = None, unplanned: bool = False,
               release_done: bool = False, prep: CallPrep | None = None,
               ahead=None, whole: bool = False) -> list[object]:
        """SQL values for `rows` (aligned); NULL or an empty (blank) string in any binding gives
        NULL. `release_done`: the
        caller's `kv` holds documents only these rows read (a join's anchors): each is released
        as soon as its last row is answered, so the anchors of a chunk need not fit the KV
        arena at once. `prep`: `prepare(layout, rows)` done ahead (else done here); `ahead`: a
        callable run once while the engine works on this call (the caller's preparation of its
        next call, off the engine's idle path; when: BatchPipeline.run). An aggregate's groups larger
        than the context are answered by map-reduce (exec/aggregate.py) unless `whole` (its
        rows each fit one prompt)."""
        writer = self.writer_of(layout.op)
        if writer is not self:
            # written by the generation model: its engine, tokenizer and answers' identity (a
            # document KV of this runner's engine means nothing to it)
            return writer.answer(op_id, layout, rows, unplanned=unplanned)
        aspects = dict(layout.op.task_args).get("aspects")
        if aspects is not None:
            if ahead is not None:
                ahead()
            return answer_aspects(self, op_id, layout, rows, kv, unplanned,
                                  json.loads(aspects))
        if spec(layout.op.op).is_aggregate and not whole:
            fits, fits_chunk = self._prompt_fits(layout, self.map_chunks.get(op_id))
            if any(list_slot(r) is not None and not fits(r) for r in rows):
                if ahead is not None:  # (runs once whatever the path: the caller relies on it)
                    ahead()
                rep = self.report.op(op_id, layout.op.op)

                def counted(chunks: int) -> None:
                    rep.map_rounds += 1
                    rep.map_chunks += chunks

                return map_reduce(rows, fits, lambda part: self.answer(
                    op_id, layout, part, kv, unplanned, whole=True),
                    fits_chunk, counted)
        if layout.is_multi_label:
            return answer_labels(self, op_id, layout, rows, kv, unplanned)
        if layout.is_similarity:
            return answer_similarity(self, op_id, layout, rows, kv, unplanned, ahead)
        rep = self.report.op(op_id, layout.op.op)
        check_supported(layout.op)
        if spec(layout.op.op).readout == "tokens":
            return self._count_tokens(layout, rows)
        start = time.perf_counter()
        if prep is None or prep.rows is not rows:  # (prepared for other rows: done again)
            prep = self.prepare(layout, rows)
        texts, keys, cached, todo = prep.texts, prep.keys, prep.cached, prep.todo
        out: list[object] = [None] * len(rows)
        for i, key in keys.items():
            if key in cached:
                out[i] = cached[key]
        rep.nulls += prep.nulls
        rep.cache_hits += len(cached)
        if unplanned:
            rep.unplanned += len(todo)
        rep.prompts += len(texts)
        if not todo:
            if ahead is not None:
                ahead()
            rep.seconds += time.perf_counter() - start
            self.report.timeline.operator(op_id, layout.op.op, start, len(texts), len(cached))
            return out
        warn_if_weak(layout.op, self.text.model_name, layout)
        readout = self.readout(layout)
        prefixes = [texts[i][0] for i in todo]
        own_kv = (kv is None and layout.is_shared and self.share_kv
                  and len(set(prefixes)) < len(prefixes))  # some document is asked twice
        if own_kv:
            kv = self.doc_kv(private=True)
        # the first batch at the plan's speed where the plan's batching says (plan/batching.py)
        self.sizer.plan_rate = self.sizer.batching.plan_rate(rep.est_tokens, rep.est_seconds)
        stats, load_s = self._loaded_stats()
        todo = self.cached_first(todo, [texts[i][0] for i in todo])
        fresh0, req0 = stats.fresh_tokens, stats.requested_tokens
        hits0 = getattr(stats, "kv_hit_tokens", 0)
        gpu0 = getattr(stats, "gpu_pass_s", 0.0)
        decoded0 = getattr(stats, "decode_tokens", 0)
        forced0 = getattr(stats, "forced_tokens", 0)
        retries0 = getattr(stats, "alloc_retries", 0)
        preempted0 = getattr(stats, "preemptions", 0)
        if self.progress is not None:  # after the model load, which shows as its own stage
            self.progress.op_start(f"{layout.op.op} #{op_id}", len(todo),
                                   sum(len(p) + len(q) for p, q in (texts[i] for i in todo)) // 4)
        try:
            if self.uses_kv(layout, kv) and kv.private and not layout.partner_slots:
                # (a pair layout's span readout locates its cue in the request's own tokens;
                # documents already resident, a join's carried anchors, are extended by the
                # stem here: the operator's fresh tokens)
                self._share_stem(kv, [texts[i][1] for i in todo])
            pipeline = BatchPipeline(self, layout, readout, kv, rep,
                                     self._minimums.setdefault(rep.op, PrefixCounter()))
            pipeline.run([texts[i] for i in todo],
                         lambda lo, hi, answers: self._store(layout, todo[lo:hi], keys, out,
                                                             answers),
                         release_done and self.uses_kv(layout, kv), ahead)
        finally:
            rep.fresh_tokens += stats.fresh_tokens - fresh0
            rep.requested_tokens += stats.requested_tokens - req0
            rep.kv_hit_tokens += getattr(stats, "kv_hit_tokens", 0) - hits0
            rep.gpu_pass_s += getattr(stats, "gpu_pass_s", 0.0) - gpu0
            rep.decode_tokens += getattr(stats, "decode_tokens", 0) - decoded0
            rep.forced_tokens += getattr(stats, "forced_tokens", 0) - forced0
            rep.alloc_retries += getattr(stats, "alloc_retries", 0) - retries0
            rep.preemptions += getattr(stats, "preemptions", 0) - preempted0
            if own_kv and kv is not None:
                kv.release()
            if self.progress is not None:
                self.progress.op_done()
            self.text.flush()
            rep.seconds += time.perf_counter() - start - load_s
            self.report.timeline.operator(op_id, layout.op.op, start, len(texts), len(cached),
                                          self.engine)  # its span holds the load's, if any
        return out

    def cached_first(self, items: list, documents: list[str]) -> list:
        """`items` (one per document text, in the same order) in the plan's call order
        (plan/call_order.py): with CACHED_FIRST, those whose document the engine's prefix cache
        still holds (observed here) first. Documents only ever read inside a full prompt are
        not cached."""
        if self.call_order != CACHED_FIRST:
            return items
        lookup = getattr(self.engine, "cached_tokens", None)
        cache = getattr(self.engine, "prefix_cache", None)
        if lookup is None or not items or (cache is not None and not cache.index.num_pages):
            return items  # (nothing cached: the documents are not tokenized ahead of the batches)
        distinct = list(dict.fromkeys(documents))
        heads = self.text.heads(distinct)  # (the index is the engine thread's to touch)
        held = dict(zip(distinct, engine_thread.submit(lookup, heads).result()))
        if not any(held.values()):
            return items
        return [items[k] for k in held_first([held[d] for d in documents])]

    def _loaded_stats(self):
        """(the engine's stats, seconds its load took now): the first use loads the model, the
        report's load (a timeline phase of its own), not the operator's."""
        loading = time.perf_counter()
        stats = self.engine.stats
        load_s = time.perf_counter() - loading
        if load_s <= 0.05:
            return stats, 0.0
        self.report.timeline.phase("model_load", loading, loading + load_s)
        return stats, load_s

    def _share_stem(self, kv: DocKV, suffixes: list[str]) -> None:
        """Move the token ids every question here starts with (e.g. "Question: Does the report
        (see the text above) mention the reaction") into the documents' prefixes: they are
        computed once per document, not once per row. The ids are the questions' own, so the
        prompts are unchanged; each row keeps at least its last token."""
        tails = self.text.tails(list(dict.fromkeys(suffixes)))
        if not tails:
            return
        first, n = tails[0], min(len(t) for t in tails) - 1
        for t in tails[1:]:
            n = next((i for i in range(n) if t[i] != first[i]), n)
        if n > 0:
            kv.set_stem(first[:n])

    def answer_reference(self, op_id: int, layout: OpPrompt,
                         rows: Sequence[Sequence[object]]) -> list[object]:
        """SQL values for `rows` (none NULL) asked again, each prompt whole, at the re-ask
        band's reference precision (BatchPipeline.ask_reference), replacing in the cache what
        the faster precision answered: a value put together from several of them (a
        similarity's two directions) was a close call only its caller could see."""
        prep = self.prepare(layout, rows)
        rep = self.report.op(op_id, layout.op.op)
        pipeline = BatchPipeline(self, layout, self.readout(layout), None, rep,
                                 self._minimums.setdefault(rep.op, PrefixCounter()))
        order = list(range(len(rows)))
        out: list[object] = [None] * len(rows)
        self._keep(layout, order, prep.keys, out,
                   pipeline.ask_reference([prep.texts[i] for i in order]))
        rep.reasked += len(rows)
        return out

    def _store(self, layout: OpPrompt, batch: list[int], keys: dict, out: list,
               answers: list[Answer]) -> None:
        self._keep(layout, batch, keys, out, answers)
        if self.progress is not None:
            self.progress.advance(len(batch), self.engine.stats.fresh_tokens)

    def _keep(self, layout: OpPrompt, batch: list[int], keys: dict, out: list,
              answers: list[Answer]) -> None:
        """Rows `batch`'s answers as SQL values, in `out` and the answer cache."""
        values = {keys[i]: layout.sql_value(a) for i, a in zip(batch, answers)}
        self.cache.put_many(values)
        for i in batch:
            out[i] = values[keys[i]]

    def answer_tokens(self, readout) -> int:
        """The context a prompt leaves for its answer: the tokens it may generate (within the
        session's cap on every answer, a LimitedEngine's), else the one it is read from."""
        return answer_length(readout, self.answer_cap())

    def writer_of(self, op) -> OpRunner:
        """The runner whose model writes `op`'s answers: the generation model's for a decoded
        operator when the session has one, else this one."""
        return self.decoder if self.decoder is not None and is_decoded(op) else self

    def answer_cap(self) -> int | None:
        """The session's cap on every generated answer's tokens (a LimitedEngine's), if any."""
        return getattr(self.engine, "max_new_tokens", None)

    def _prompt_fits(self, layout: OpPrompt, planned: int | None = None):
        """(fits, fits_chunk): whether an aggregate row's prompt, its answer's tokens included,
        fits the engine's context, and whether it fits one map chunk of a group past the
        context: the plan's (`planned`, its aggregate step's), within the context; an
        aggregate no core planned (its texts are not a scan's column) gets the same rule
        (plan/chunking.map_chunk_tokens) applied here to its measured template. A prompt's
        size is the template's own tokens (measured once per row of other values) plus each
        text's (tokenized once, for both tests) and their separators."""
        answer = self.answer_tokens(self.readout(layout))
        limit = self.engine.max_context - answer
        config = getattr(self.engine, "config", None)
        model = ModelSpec.from_attrs(config) if config is not None else None
        counts: dict[str, int] = {}
        overhead: dict[tuple, int] = {}

        def size(row) -> tuple[int, int] | None:
            """(the prompt's tokens, its template's), None without a list of texts."""
            slot = list_slot(row)
            if slot is None:
                return None
            items = [str(v) for v in row[slot] if v is not None]
            new = [t for t in dict.fromkeys(items) if t not in counts]
            for t, ids in zip(new, self.text.tokenize(new) if new else ()):
                counts[t] = len(ids)
            rest = tuple(row[:slot]) + tuple(row[slot + 1:])
            if rest not in overhead:
                head, tail = layout.texts(tuple(row[:slot]) + ("x",) + tuple(row[slot + 1:]))
                overhead[rest] = len(self.text.heads([head])[0]) + len(self.text.tails([tail])[0])
            return overhead[rest] + sum(counts[t] + 2 for t in items), overhead[rest]

        def fits(row) -> bool:
            measured = size(row)
            return measured is None or measured[0] <= limit

        def fits_chunk(row) -> bool:
            measured = size(row)
            if measured is None:
                return True
            if planned:
                budget = min(planned, limit)
            else:
                budget = limit if model is None else \
                    map_chunk_tokens(model, answer, measured[1], limit)
            return measured[0] <= budget
        return fits, fits_chunk

    def _count_tokens(self, layout: OpPrompt, rows: Sequence[Sequence[object]]) -> list[object]:
        texts = [None if any(v is None for v in r) else layout.texts(r)[0] for r in rows]
        counts = self.text.tokenize([t for t in texts if t is not None])
        it = iter(counts)
        return [None if t is None else len(next(it)) for t in texts]

    def uses_kv(self, layout: OpPrompt, kv: DocKV | None) -> bool:
        """Whether `layout`'s documents are read from `kv` (a prefix each) in this call."""
        return layout.is_shared and kv is not None and self.share_kv

