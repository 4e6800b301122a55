"""Answers for one AI operator over many rows: cache first, then the engine in batches.

Rows are tuples of binding values. A NULL value gives a NULL answer without a prompt. Answers are
cached by text (the model's identity, the rendered prompt, the readout and its calibration
prompt), so looking them up needs neither the model nor its tokenizer: a query whose answers are
all cached loads nothing. Prompt parts become token ids through the session's PromptText (each
distinct document, question and calibration text tokenized once). Shared layouts put the
document into a prefix whose KV lives in a DocKV (the caller's, when the plan keeps it across
steps; otherwise a local one for documents used more than once in this call). Batches are sized
to take a few seconds of engine time, and answers reach the cache after every batch, so an
interrupted run keeps what it computed and its retry resumes there.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import wait
from operator import itemgetter

from quail_engine.errors import ExecutionError
from quail_engine.exec import engine_thread
from quail_engine.exec.aggregate import list_slot, map_reduce
from quail_engine.exec.answer_cache import AnswerCache, AnswerKeys, text_digest
from quail_engine.exec.doc_kv import DocKV
from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.prompts import (
    OpPrompt,
    is_decoded,
    pair_layout_for,
    repetition_penalty_for,
    similarity_value,
    value_text,
    warn_if_weak,
)
from quail_engine.exec.report import Report
from quail_engine.exec.tasks import check_supported
from quail_engine.infer.api import Answer, GenerateReadout, Request
from quail_engine.infer.radix import PrefixCounter, common_prefix_length
from quail_engine.plan.cost import Work
from quail_engine.sql.op_kinds import spec

log = logging.getLogger(__name__)
QUESTION_RESERVE = 256  # tokens kept free for the question when a document is cut
BATCH_SECONDS = 5.0     # engine time one batch aims at (answers reach the cache this often)
# engine time an operator's first batch aims at: it is timed before the batches grow, so
# progress, answer-cache commits and cancellation points come early whatever the speed guess
FIRST_BATCH_SECONDS = 1.0
# a batch holds at most this many times the fresh tokens of its operator's batch before: a
# speed measured on small batches can overstate larger ones (fixed costs, kernels chosen by
# shape), and growing step by step bounds how long any batch can run before it is measured
GROWTH = 4.0
# fresh tokens per second the first batch is sized at where nothing better is known (a CPU:
# the plan's speed of light there is many times too fast): a slow CPU in float32 under load
# reaches this much with the embedded models, so the first batch ends within about a second
FIRST_RATE = 400.0
# a generating batch holds at least this many arena-fulls of answers: continuous batching keeps
# the arena full while the first answers finish and the next start, and only the last wave of
# a batch drains below it
DECODE_WAVES = 2
RATE_MIN_TOKENS = 16384  # a smaller batch (a sample) understates the engine's speed


@dataclasses.dataclass
class CallPrep:
    """One call's host work before the engine (OpRunner.prepare): each non-NULL row's prompt
    (document part, question part) and answer-cache key, the answers the cache held, the rows
    left to compute in run order and the count of rows with a NULL or blank argument."""
    rows: Sequence[Sequence[object]]
    texts: dict[int, tuple[str, str]]
    keys: dict[int, str]
    cached: dict[str, object]
    todo: list[int]
    nulls: int


class OpRunner:
    """`text`: the PromptText prompts are tokenized through (default: the engine's tokenizer).
    `precision`: part of the answers' identity (fp8 answers are not bf16 answers). `decoder`:
    an OpRunner over another model that writes the generative operators' text (None: this
    one)."""

    def __init__(self, engine, cache: AnswerCache, report: Report, progress=None,
                 on_long: str = "truncate", calibrate: bool = True, batch_size: int = 65536,
                 text: PromptText | None = None, precision: str = ""):
        if on_long not in ("truncate", "error"):
            raise ValueError(f"on_long must be 'truncate' or 'error', got {on_long!r}")
        self.engine, self.cache, self.report = engine, cache, report
        self.progress, self.on_long, self.calibrate = progress, on_long, calibrate
        self.batch_size = batch_size
        self.share_kv = True
        # the first batch sized by the plan's speed (the device's speed of light): on a GPU
        # near it; a CPU runs the embedded models far below its probed GEMM peak, so there it
        # is sized at FIRST_RATE
        self.plan_rate_first = True
        self.precision = precision
        self.decoder: OpRunner | None = None
        self._text = text
        self._pair_layout: bool | None = None
        self._calibration: dict[tuple, list[int]] = {}
        self._tokens_per_s: float | None = None  # measured on this runner's batches
        self._rate_tokens = 0  # fresh tokens of the batch that set _tokens_per_s
        self._plan_rate: float | None = None  # the plan's guess for the current call
        self._finished: dict[int, float] = {}  # per operator: its largest finished batch
        #                                        (guessed fresh tokens, _prompt_tokens)
        self._releasable: list[str] = []  # documents the engine's worker releases next
        self._engine_s = 0.0  # engine seconds of the current pipeline
        self._minimums: dict[int, PrefixCounter] = {}  # per operator, across its calls

    def layout(self, op) -> OpPrompt:
        """The prompt layout of `op` for this runner's model (exec/prompts.py)."""
        if self._pair_layout is None:
            self._pair_layout = pair_layout_for(self.text.model_name)
        return OpPrompt.for_op(op, self._pair_layout)

    @property
    def text(self) -> PromptText:
        if self._text is None:
            self._text = PromptText.of_engine(lambda: self.engine)
        return self._text

    def loaded_engine(self):
        """The engine if it is loaded, else None (loads nothing)."""
        return self.engine

    def doc_kv(self, private: bool = False) -> DocKV:
        """A DocKV over this runner's engine; `private`: read by one operator alone (DocKV)."""
        return DocKV(lambda: self.engine, QUESTION_RESERVE, self.on_long, self.text, private)

    def _calibration_texts(self, layout: OpPrompt) -> tuple[str, str] | None:
        if not self.calibrate or not spec(layout.op.op).is_calibrated or layout.partner_slots:
            return None  # a pair layout carries its own content-free reference
        if layout.per_label:  # one per label (readout): keyed by its form
            return layout.label_calibration("{label}")
        return layout.texts(layout.calibration_values())

    def cache_readout(self, layout: OpPrompt) -> str:
        """The readout as the answer cache keys it: its kind and labels, and the calibration
        prompt's text (not its token ids, which would need the tokenizer)."""
        return repr((self._model_readout(layout.readout()), self._calibration_texts(layout),
                     self.precision, layout.value_shape()))

    def _model_readout(self, readout):
        """`readout` with what this runner's model needs on it (a repetition penalty on the
        embedded models' generated text)."""
        if isinstance(readout, GenerateReadout):
            penalty = repetition_penalty_for(self.text.model_name)
            if penalty != readout.repetition_penalty:
                return dataclasses.replace(readout, repetition_penalty=penalty)
        return readout

    def readout(self, layout: OpPrompt):
        """The readout of `layout`'s requests; for yes/no label decisions, a dict from each
        label's question to its readout (each calibrated on its own content-free prompt)."""
        cal = self._calibration_texts(layout)
        if cal is None:
            return self._model_readout(layout.readout())
        if layout.per_label:
            return {layout.label_calibration(lb.name)[1]:
                    layout.readout(self._calibration_tokens(layout.label_calibration(lb.name)))
                    for lb in layout.op.labels or ()}
        return layout.readout(self._calibration_tokens(cal))

    def _calibration_tokens(self, cal: tuple[str, str]) -> list[int]:
        if cal not in self._calibration:
            head, tail = self.text.split(*cal)
            self._calibration[cal] = head + tail
        return self._calibration[cal]

    def prepare(self, layout: OpPrompt, rows: Sequence[Sequence[object]]) -> CallPrep:
        """The host's part of a call before the engine (CallPrep): prompts rendered, keys, the
        cached answers, the rows left in run order. Touches neither the engine nor the report,
        so a join prepares its next chunk of anchors on another thread while this one runs."""
        texts: dict[int, tuple[str, str]] = {}
        render = _TextMemo(layout)
        nulls = 0
        for i, values in enumerate(rows):
            if None in values or any(isinstance(v, (str, list, tuple)) and not value_text(v).strip()
                                     for v in values):
                nulls += 1  # an empty argument is no input: NULL, not an answer about nothing
            else:
                texts[i] = render(values)
        keyer = AnswerKeys(self.text.identity, self.cache_readout(layout))
        digests: dict[str, bytes] = {}
        keys = {}
        for i, (p, s) in texts.items():
            digest = digests.get(p)
            if digest is None:
                digest = digests[p] = text_digest(p)
            keys[i] = keyer.key(digest, s)
        cached = self.cache.get_many(keys.values())
        todo = [i for i, key in keys.items() if key not in cached]
        todo.sort(key=texts.__getitem__)  # rows that begin alike run together (shared KV)
        return CallPrep(rows, texts, keys, cached, todo, nulls)

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

    def refreshed(self, prep: CallPrep) -> CallPrep:
        """`prep` with the answers the cache has gained since it was prepared (another call's
        in between: a join riding along another asks pairs the other may have just answered)
        among the cached."""
        gained = self.cache.get_many(prep.keys[i] for i in prep.todo) if prep.todo else {}
        if not gained:
            return prep
        todo = [i for i in prep.todo if prep.keys[i] not in gained]
        return CallPrep(prep.rows, prep.texts, prep.keys, {**prep.cached, **gained}, todo,
                        prep.nulls)

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
        next call, off the engine's idle path; when: _pipeline). An aggregate's groups larger
        than the context are answered by map-reduce (exec/aggregate.py) unless `whole` (its
        rows each fit one prompt)."""
        if self.decoder is not None and is_decoded(layout.op):
            # written by the generation model: its engine, tokenizer and answers' identity (a
            # document KV of this runner's engine means nothing to it)
            return self.decoder.answer(op_id, layout, rows, unplanned=unplanned)
        aspects = dict(layout.op.task_args).get("aspects")
        if aspects is not None:
            if ahead is not None:
                ahead()
            return self._aspects(op_id, layout, rows, kv, unplanned, json.loads(aspects))
        if spec(layout.op.op).is_aggregate and not whole:
            fits = self._fits_one_prompt(layout)
            if any(list_slot(r) is not None and not fits(r) for r in rows):
                if ahead is not None:  # (runs once whatever the path: the caller relies on it)
                    ahead()
                return map_reduce(rows, fits, lambda part: self.answer(
                    op_id, layout, part, kv, unplanned, whole=True))
        if layout.is_multi_label:
            return self._labels(op_id, layout, rows, kv, unplanned)
        if layout.is_similarity:
            return self._similarity(op_id, layout, rows, kv, unplanned, ahead)
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
        self._plan_rate = (rep.est_tokens / rep.est_seconds
                           if self.plan_rate_first and rep.est_seconds and rep.est_tokens
                           else None)
        stats, load_s = self._loaded_stats()
        todo = self.cached_first(todo, [texts[i][0] for i in todo])
        fresh0, req0 = stats.fresh_tokens, stats.requested_tokens
        hits0 = getattr(stats, "kv_hit_tokens", 0)
        gpu0 = getattr(stats, "gpu_pass_s", 0.0)
        decoded0 = getattr(stats, "decode_tokens", 0)
        if self.progress is not None:  # after the model load, which shows as its own stage
            self.progress.op_start(f"{layout.op.op} #{op_id}", len(todo),
                                   sum(len(p) + len(q) for p, q in (texts[i] for i in todo)) // 4)
        try:
            if self._uses_kv(layout, kv) and kv.private and not layout.partner_slots:
                # (a pair layout's span readout locates its cue in the request's own tokens;
                # documents already resident, a join's carried anchors, are extended by the
                # stem here: the operator's fresh tokens)
                self._share_stem(kv, [texts[i][1] for i in todo])
            self._pipeline(layout, readout, [texts[i] for i in todo], kv, rep,
                           lambda lo, hi, answers: self._store(layout, todo[lo:hi], keys, out,
                                                               answers),
                           release_done and self._uses_kv(layout, kv), ahead)
        finally:
            rep.fresh_tokens += stats.fresh_tokens - fresh0
            rep.requested_tokens += stats.requested_tokens - req0
            rep.kv_hit_tokens += getattr(stats, "kv_hit_tokens", 0) - hits0
            rep.gpu_pass_s += getattr(stats, "gpu_pass_s", 0.0) - gpu0
            rep.decode_tokens += getattr(stats, "decode_tokens", 0) - decoded0
            if own_kv and kv is not None:
                kv.release()
            if self.progress is not None:
                self.progress.op_done()
            self.text.flush()
            rep.seconds += time.perf_counter() - start - load_s
            self.report.timeline.operator(op_id, layout.op.op, start, len(texts), len(cached),
                                          self.engine)  # its span holds the load's, if any
        return out

    def _aspects(self, op_id: int, layout: OpPrompt, rows: Sequence[Sequence[object]],
                 kv: DocKV | None, unplanned: bool, aspects: list[str]) -> list[object]:
        """Snowflake's AI_SENTIMENT(text, categories): the overall sentiment and each aspect's,
        each asked as its own question after the same document (its KV computed once and
        shared), as {"categories": [{"name": "overall", "sentiment": ...}, {"name": aspect,
        ...}, ...]}; NULL where the input is."""
        base = dataclasses.replace(layout.op, output_type=None, task_args=tuple(
            (k, v) for k, v in layout.op.task_args if k != "aspects"))
        asks = [("overall", base)] + [
            (a, dataclasses.replace(base, instruction=f"Consider only what the text says about "
                                                      f"{a}; if it says nothing about it, the "
                                                      "answer is unknown."))
            for a in aspects]
        answers = [self.answer(op_id, dataclasses.replace(layout, op=op), rows, kv=kv,
                               unplanned=unplanned) for _, op in asks]
        out: list[object] = []
        for k in range(len(rows)):
            got = [a[k] for a in answers]
            out.append(None if None in got else json.dumps({"categories": [
                {"name": name, "sentiment": value} for (name, _), value in zip(asks, got)]}))
        return out

    def _labels(self, op_id: int, layout: OpPrompt, rows: Sequence[Sequence[object]],
                kv: DocKV | None, unplanned: bool) -> list[object]:
        """A multi-label op's values: each row asked once per label in one call
        (`layout.decisions()`: the document is the prefix, so its KV is computed once and each
        label's decision, cached by itself, is a short suffix on it); a row's value is the
        labels decided yes, in the op's order (none: an empty list), NULL where its input is."""
        names = [lb.name for lb in layout.op.labels or ()]
        asked = [(*values, name) for values in rows for name in names]
        decided = self.answer(op_id, layout.decisions(), asked, kv=kv, unplanned=unplanned)
        out: list[object] = []
        for k in range(len(rows)):
            row = decided[k * len(names):(k + 1) * len(names)]
            out.append(None if None in row else [n for n, yes in zip(names, row) if yes])
        return out

    def _similarity(self, op_id: int, layout: OpPrompt, rows: Sequence[Sequence[object]],
                    kv: DocKV | None, unplanned: bool, ahead) -> list[object]:
        """A similarity's values: each row asked in both directions in one call
        (`layout.directions()`: the second text after the first, and the first after the
        second, each direction's PMI cached by itself), its value the mean of the two through
        the curve (similarity_value), so exchanging the arguments gives the same number. Rows
        whose mean is a close call at a number the SQL compares it with are asked again, both
        directions, at the reference precision (_reask_close). The values are cached too, by
        the whole readout (the SQL's numbers included), so a query answered before needs
        neither the model nor its band."""
        prep = self.prepare(layout, rows)
        rep = self.report.op(op_id, layout.op.op)
        rep.nulls += prep.nulls
        rep.cache_hits += len(prep.cached)
        out = [prep.cached.get(prep.keys.get(i)) for i in range(len(rows))]
        need = [rows[i] for i in prep.todo]
        asked = [*need, *(layout.swapped(values) for values in need)]
        pmis = self.answer(op_id, layout.directions(), asked, kv=kv, unplanned=unplanned,
                           ahead=ahead)
        self._reask_close(op_id, layout, asked, pmis)
        values = {}
        for k, i in enumerate(prep.todo):
            out[i] = similarity_value(layout.op, (pmis[k] + pmis[len(need) + k]) / 2)
            values[prep.keys[i]] = out[i]
        self.cache.put_many(values)
        return out

    def _reask_close(self, op_id: int, layout: OpPrompt, asked: list, pmis: list) -> None:
        """The re-ask band on a similarity's mean: a row whose two directions' mean margin the
        band holds at one of the SQL's numbers (the margin the whole readout would have) has
        both directions answered again by the reference precision, in `pmis` and the cache.
        Each direction alone can be far from the number while their mean is near it, so the
        engine's own band, which sees one request at a time, is not asked per direction."""
        readout = layout.readout()
        if not readout.thresholds or not asked or (
                self.loaded_engine() is None and not self.precision.endswith("-band")):
            return  # (every direction was cached, and no band could send one back: not loaded)
        band = getattr(self.engine, "band", None)  # a ReaskingEngine's (infer/reask.py)
        n = len(asked) // 2
        close = [] if band is None else [
            k for k in range(n)
            if band.holds(readout, Answer(0.0, margin=(pmis[k] + pmis[n + k]) / 2))]
        if not close:
            return
        one = layout.directions()
        again = close + [n + k for k in close]
        texts = [one.texts(asked[i]) for i in again]
        limit = self.engine.max_context - 1
        rep = self.report.op(op_id, layout.op.op)
        requests = [Request(tuple(self._fit(head + tail, limit, rep)), one.readout())
                    for head, tail in (self.text.split(p, q) for p, q in texts)]
        answers = engine_thread.submit(self.engine.ask_reference, requests).result()
        keyer = AnswerKeys(self.text.identity, self.cache_readout(one))
        values = {}
        for i, (p, q), answer in zip(again, texts, answers):
            pmis[i] = one.sql_value(answer)
            values[keyer.key(text_digest(p), q)] = pmis[i]
        self.cache.put_many(values)
        rep.reasked += len(again)

    def cached_first(self, items: list, documents: list[str]) -> list:
        """`items` (one per document text, in the same order) with those whose document the
        engine's prefix cache still holds first, order otherwise kept: pages an earlier
        operator of the statement left by content (a chain of joins that reads one table
        twice: the documents its first join encoded, asked again by a later join) are read
        before new
        documents evict them. Documents only ever read inside a full prompt are not cached."""
        lookup = getattr(self.engine, "cached_tokens", None)
        cache = getattr(self.engine, "prefix_cache", None)
        if lookup is None or not items or (cache is not None and not cache.index.num_pages):
            return items  # (nothing cached: the documents are not tokenized ahead of the batches)
        distinct = list(dict.fromkeys(documents))
        heads = self.text.heads(distinct)  # (the index is the engine thread's to touch)
        held = dict(zip(distinct, engine_thread.submit(lookup, heads).result()))
        if not any(held.values()):
            return items
        order = sorted(range(len(items)), key=lambda k: held[documents[k]] == 0)
        return [items[k] for k in order]

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

    def _pipeline(self, layout: OpPrompt, readout, texts: list[tuple[str, str]],
                  kv: DocKV | None, rep, done, release_done: bool = False,
                  ahead=None) -> None:
        """Batches through the engine with the host one batch ahead: while the engine (its one
        worker thread, engine_thread.py) runs batch N, this thread tokenizes batch N+1 and then
        counts and stores batch N-1's answers, so the device does not wait for the host between
        batches. With
        `release_done`, a document whose rows are all answered is released by the worker before
        its next batch (the worker alone touches the engine). `ahead` runs once, when the first
        batch's answers are back (the second is then running): not beside the first, whose
        encoding of the call's documents is the launch-heavy part (a helper thread preparing
        the next chunk beside it slows those passes); in a call of
        one batch, as it is handed over (the alternative is the engine waiting for it all)."""
        remaining = Counter(p for p, _ in texts) if release_done else None
        self._releasable, self._engine_s = [], 0.0
        self._minimum = self._minimums.setdefault(rep.op, PrefixCounter())
        waited, batches = 0.0, 0
        pending = None
        in_flight: list = []
        try:
            lo = 0
            while lo < len(texts) or pending is not None:
                submitted = None
                if lo < len(texts):
                    tokens = self._prompt_tokens(texts[lo:lo + 64], self._uses_kv(layout, kv))
                    hi = lo + max(self._batch_prompts(tokens, rep.op),
                                  self._decode_rows(readout, tokens))
                    guess = (min(hi, len(texts)) - lo) * tokens
                    prepared = self._prepare(layout, texts[lo:hi], kv)
                    submitted = (lo, min(hi, len(texts)), guess, engine_thread.submit(
                        self._execute, layout, readout, texts[lo:hi], prepared, kv, rep,
                        into=in_flight))
                    lo = hi
                    batches += 1
                    if ahead is not None and lo >= len(texts):  # this call's only batch
                        ahead()
                        ahead = None
                if pending is not None:
                    p_lo, p_hi, p_guess, future = pending
                    t0 = time.perf_counter()
                    answers, requests = future.result()
                    waited += time.perf_counter() - t0
                    self._batch_finished(rep.op, p_guess)
                    if ahead is not None:
                        ahead()
                        ahead = None
                    self._count_minimum(rep, texts[p_lo:p_hi], requests, kv)
                    done(p_lo, p_hi, answers)
                    if remaining is not None:
                        for p, _ in texts[p_lo:p_hi]:
                            remaining[p] -= 1
                            if not remaining[p]:
                                self._releasable.append(p)
                pending = submitted
        except KeyboardInterrupt:
            self._stop_engine(in_flight)
            raise
        finally:  # nothing of this call may still run on the engine once it returns or raises
            wait(in_flight)
        rep.engine_s += self._engine_s
        rep.host_wait_s += waited
        log.info("%s: %d prompts in %d batches, engine %.2f s, host waited %.2f s for it",
                 layout.op.op, len(texts), batches, self._engine_s, waited)

    def _stop_engine(self, in_flight: list) -> None:
        """Ctrl-C: batches not started are dropped and the running one stops at the engine's
        next forward pass or layer (infer/interrupt.py), so control comes back within about a
        second instead of after the batches in flight."""
        for future in in_flight:
            future.cancel()
        engine = self.loaded_engine()
        interrupt = getattr(engine, "interrupt", None)
        if interrupt is None:
            return
        interrupt()
        try:
            wait(in_flight)
        finally:
            engine.resume()

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

    def _store(self, layout: OpPrompt, batch: list[int], keys: dict, out: list,
               answers: list[Answer]) -> None:
        values = {keys[i]: layout.sql_value(a) for i, a in zip(batch, answers)}
        self.cache.put_many(values)
        for i in batch:
            out[i] = values[keys[i]]
        if self.progress is not None:
            self.progress.advance(len(batch), self.engine.stats.fresh_tokens)

    def _batch_prompts(self, tokens: float, op: int = 0) -> int:
        """Prompts of `tokens` fresh tokens each (_prompt_tokens) in the next batch of operator
        `op`, within [1, batch_size]: until one of its batches has finished, about
        FIRST_BATCH_SECONDS of engine time, then BATCH_SECONDS, at the fresh tokens/s
        measured so far (before any batch was timed: the plan's speed where plan_rate_first,
        else FIRST_RATE), and at most GROWTH times the operator's largest
        finished batch. So no batch runs long before the speed it is sized by was measured on
        one of comparable size, and answers reach the cache, progress moves and Ctrl-C is
        honoured every few seconds whatever the guess said."""
        rate = self._tokens_per_s or self._plan_rate or FIRST_RATE
        done = self._finished.get(op)
        if done is None:
            budget = FIRST_BATCH_SECONDS * rate
        else:
            seconds = BATCH_SECONDS if self._tokens_per_s is not None else FIRST_BATCH_SECONDS
            budget = min(seconds * rate, GROWTH * done)
        return int(min(self.batch_size, max(1.0, budget / tokens)))

    def _answer_tokens(self, readout) -> int:
        """The context a prompt leaves for its answer: the tokens it may generate (within the
        session's cap on every answer, a LimitedEngine's), else the one it is read from."""
        if not isinstance(readout, GenerateReadout):
            return 1
        cap = getattr(self.engine, "max_new_tokens", None)
        return min(readout.max_tokens, cap) if isinstance(cap, int) else readout.max_tokens

    def _fits_one_prompt(self, layout: OpPrompt):
        """Whether an aggregate row's prompt, its answer's tokens included, fits the engine's
        context: the template's own tokens (measured once per row of other values) plus each
        text's (tokenized once) and their separators."""
        limit = self.engine.max_context - self._answer_tokens(self.readout(layout))
        counts: dict[str, int] = {}
        overhead: dict[tuple, int] = {}

        def fits(row) -> bool:
            slot = list_slot(row)
            if slot is None:
                return True
            items = [str(v) for v in row[slot] if v is not None]
            new = [t for t in dict.fromkeys(items) if t not in counts]
            for t, ids in zip(new, self.text.tokenize(new) if new else ()):
                counts[t] = len(ids)
            rest = tuple(row[:slot]) + tuple(row[slot + 1:])
            if rest not in overhead:
                head, tail = layout.texts(tuple(row[:slot]) + ("x",) + tuple(row[slot + 1:]))
                overhead[rest] = len(self.text.heads([head])[0]) + len(self.text.tails([tail])[0])
            return overhead[rest] + sum(counts[t] + 2 for t in items) <= limit
        return fits

    def _decode_rows(self, readout, tokens: float) -> int:
        """The fewest prompts of a batch that generates: DECODE_WAVES times the answers the
        engine's KV arena holds at once (1 where its KV is unbounded, or nothing is
        generated). Batches sized by engine time alone hold fewer answers than the arena, and
        each batch's decode steps then run below the batch the GPU could take."""
        if not isinstance(readout, GenerateReadout):
            return 1
        fits = getattr(self.engine, "decode_rows", None)
        rows = fits(int(tokens), readout.max_tokens) if fits is not None else None
        return 1 if rows is None else min(self.batch_size, DECODE_WAVES * rows)

    def _prompt_tokens(self, sample: list[tuple[str, str]], resident_prefix: bool) -> float:
        """Fresh tokens a prompt like those of `sample` costs, guessed as characters / 4: its
        question alone when its document is resident (a join partner, a second predicate),
        else the whole prompt less, where the engine shares prefixes across rows, the beginning
        it shares with the row before (rows come sorted by prompt: agent traces' cumulative
        snapshots each add a few turns, and counted whole they would make batches of a small
        fraction of the target)."""
        if not sample:
            return 1.0
        if resident_prefix:
            chars = sum(len(s) for _, s in sample)
        else:
            whole = [p + s for p, s in sample]
            chars = sum(map(len, whole))
            if getattr(self.engine, "prefix_cache", None) is not None:
                chars -= sum(common_prefix_length(a, b) for a, b in zip(whole, whole[1:]))
        return max(1.0, chars / (4.0 * len(sample)))

    def _batch_finished(self, op: int, tokens: float) -> None:
        """Operator `op` finished a batch of `tokens` guessed fresh tokens: later batches may
        grow to GROWTH times the largest such."""
        self._finished[op] = max(tokens, self._finished.get(op, 0.0))

    def _observe(self, tokens: int, seconds: float) -> None:
        """Learn the engine's speed from a finished batch. A batch that ran FIRST_BATCH_SECONDS
        or longer sets it: whatever a guess or a smaller batch said, the next batches are sized
        by what the last long one took. A shorter one can only raise it, and only when it is at
        least as large as the batch that set it: a short batch misleads both ways (fixed costs
        and first-shape setup understate the speed; kernels chosen by shape or caches that
        still fit overstate what a larger batch will do). A large short one (RATE_MIN_TOKENS)
        may also lower it, at most by half (noise)."""
        if tokens <= 0 or seconds <= 0:
            return
        rate, current = tokens / seconds, self._tokens_per_s
        if current is None or seconds >= FIRST_BATCH_SECONDS:
            self._tokens_per_s, self._rate_tokens = rate, tokens
        elif tokens >= self._rate_tokens:
            if rate > current or tokens >= RATE_MIN_TOKENS:
                self._tokens_per_s = max(rate, 0.5 * current)
                self._rate_tokens = tokens

    def _count_tokens(self, layout: OpPrompt, rows: Sequence[Sequence[object]]) -> list[object]:
        texts = [None if any(v is None for v in r) else layout.texts(r)[0] for r in rows]
        counts = self.text.tokenize([t for t in texts if t is not None])
        it = iter(counts)
        return [None if t is None else len(next(it)) for t in texts]

    def _prepare(self, layout: OpPrompt, texts: list[tuple[str, str]], kv: DocKV | None):
        """Host side of a batch: token ids of its questions and documents (a shared document's
        ids go to its DocKV), so the engine's thread never tokenizes."""
        tails = self.text.tails([s for _, s in texts])
        if self._uses_kv(layout, kv):
            before = kv.truncated
            kv.tokenize([p for p, _ in texts])
            return None, tails, kv.truncated - before
        return self.text.heads([p for p, _ in texts]), tails, 0

    def _uses_kv(self, layout: OpPrompt, kv: DocKV | None) -> bool:
        return layout.is_shared and kv is not None and self.share_kv

    def _execute(self, layout: OpPrompt, readout, texts: list[tuple[str, str]], prepared,
                 kv: DocKV | None, rep) -> list[Answer]:
        """Engine side of a batch (runs on the pipeline's worker thread)."""
        t0, fresh0 = time.perf_counter(), self.engine.stats.fresh_tokens
        mark = self.report.timeline.engine_mark(self.engine)
        if kv is not None and self._releasable:
            done, self._releasable = self._releasable, []
            kv.release(done)
        heads, tails, truncated = prepared
        rep.truncated += truncated
        reserve = self._answer_tokens(readout)
        max_context = self.engine.max_context
        requests: list[Request] = []
        kv_hits = 0
        prefix_lens: list[int] = []
        if self._uses_kv(layout, kv):
            resident = set(kv.handles)
            kv.ensure([p for p, _ in texts])
            encoded_now: set[str] = set()
            for (p, question), tail in zip(texts, tails):
                handle = kv.get(p)
                if p in resident or p in encoded_now:
                    kv_hits += handle.num_tokens
                encoded_now.add(p)
                tail = self._fit(tail[len(kv.stem):], max_context - handle.num_tokens - reserve,
                                 rep)
                requests.append(Request(tuple(tail), _for_question(readout, question), handle))
                prefix_lens.append(handle.num_tokens)
            rep.work = rep.work + kv.take_work()
        else:
            for (_, question), head, tail in zip(texts, heads, tails):
                tokens = self._fit(head + tail, max_context - reserve, rep)
                requests.append(Request(tuple(tokens), _for_question(readout, question)))
                prefix_lens.append(0)
        rep.work = rep.work + batch_work(prefix_lens, [len(r.tokens) for r in requests])
        reasked0 = getattr(self.engine, "reasked", 0)  # a ReaskingEngine's (infer/reask.py)
        answers = self.engine.run(requests)
        rep.reasked += getattr(self.engine, "reasked", 0) - reasked0
        self.report.timeline.engine_batch(rep.op, mark, self.engine)
        rep.kv_hit_tokens += kv_hits
        seconds = time.perf_counter() - t0
        self._engine_s += seconds
        self._observe(self.engine.stats.fresh_tokens - fresh0, seconds)
        return answers, requests

    def _count_minimum(self, rep, texts: list[tuple[str, str]], requests: list[Request],
                       kv: DocKV | None) -> None:
        """Add a batch's new minimum tokens and attention pairs (infer/radix.PrefixCounter) to
        `rep`, on the host thread while the engine runs the next batch: a row over a resident
        document counts as the document's tokens (once) and its own after them, never
        concatenated (a join's pairs would copy and compare its long anchors once per pair,
        with the GPU idle)."""
        new, pairs = self._minimum.add([r.tokens for r in requests if r.prefix is None])
        after: dict[str, list[tuple[int, ...]]] = {}
        for (p, _), r in zip(texts, requests):
            if r.prefix is not None:
                after.setdefault(p, []).append(r.tokens)
        for p, tails in after.items():
            n, q = self._minimum.add_after(kv.heads[p] + kv.stem, tails)
            new, pairs = new + n, pairs + q
        rep.minimum_tokens += new
        rep.minimum_attention_pairs += pairs

    def _fit(self, tokens: list[int], limit: int, rep) -> list[int]:
        if len(tokens) <= limit:
            return tokens
        if self.on_long == "error":
            raise ExecutionError(f"a prompt of {len(tokens)} tokens exceeds the context of "
                                 f"{self.engine.max_context} tokens (on_long='error'; "
                                 "max_context sets the context)")
        rep.truncated += 1
        keep_tail = min(len(tokens), max(1, limit // 2))
        return tokens[:max(0, limit - keep_tail)] + tokens[len(tokens) - keep_tail:]


def _for_question(readout, question: str):
    """The readout of a request asking `question`: `readout`, or its entry when it is a dict
    by question (yes/no label decisions, each label calibrated on its own)."""
    return readout[question] if isinstance(readout, dict) else readout


def picker(index: list[int]):
    """values -> the tuple of values[i] for i in `index` (an itemgetter: C speed)."""
    if len(index) > 1:
        return itemgetter(*index)
    if index:
        i = index[0]
        return lambda values: (values[i],)
    return lambda values: ()


class _TextMemo:
    """`layout.texts(values)` with each distinct document and each distinct question rendered
    once: a shared layout's prefix depends only on its document slots' values and its suffix
    only on the others (exec/prompts.py), so a join renders each anchor once, not per pair."""

    def __init__(self, layout: OpPrompt):
        self.layout = layout
        self.slots = set(layout.doc_slots)
        self.prefixes: dict[tuple, str] = {}
        self.suffixes: dict[tuple, str] = {}
        self._parts = None  # (arity, its document slots' picker, the others')

    def _split(self, n: int):
        return (n, picker([i for i in range(n) if i in self.slots]),
                picker([i for i in range(n) if i not in self.slots]))

    def __call__(self, values: Sequence[object]) -> tuple[str, str]:
        if not self.slots:
            key = tuple(values)
            text = self.prefixes.get(key)
            if text is None:
                text = self.prefixes[key] = self.layout.texts(values)[0]
            return text, ""
        if self._parts is None or self._parts[0] != len(values):
            self._parts = self._split(len(values))
        doc, rest = self._parts[1](values), self._parts[2](values)
        prefix, suffix = self.prefixes.get(doc), self.suffixes.get(rest)
        if prefix is None or suffix is None:
            # the document's first string object kept: rows of one anchor then share it, and
            # sorting or hashing them compares by identity, not by thousands of characters
            p, q = self.layout.texts(values)
            prefix = self.prefixes.setdefault(doc, p)
            suffix = self.suffixes.setdefault(rest, q)
        return prefix, suffix


def batch_work(prefix_lens: Sequence[int], own_lens: Sequence[int]) -> Work:
    """Work of requests of `own_lens` tokens over resident prefixes of `prefix_lens` (the sum
    of plan.cost.request_work over them, without a Work object per request)."""
    fresh = pairs = reads = 0.0
    for p, s in zip(prefix_lens, own_lens):
        fresh += s
        pairs += s * p + s * (s + 1) / 2
        reads += p
    return Work(fresh_tokens=fresh, attention_pairs=pairs, kv_reads=reads)
