"""One call's prompts through the engine in batches, the host one batch ahead of the engine.

Shared layouts put the document into a prefix whose KV lives in a DocKV (the caller's, when the
plan keeps it across steps; otherwise a local one for documents used more than once in the
call). Batches are sized to take a few seconds of engine time (exec/batch_sizing.py), and
their answers are handed back after every batch, so an interrupted run keeps what it computed
and its retry resumes there.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import wait

from quail_engine.exec import engine_thread
from quail_engine.exec.batch_sizing import prompt_tokens, whole_waves
from quail_engine.exec.context_fit import fit_request, within_budget
from quail_engine.exec.doc_kv import DocKV
from quail_engine.exec.prompts import OpPrompt
from quail_engine.infer.api import Answer, GenerateReadout, Request
from quail_engine.infer.radix import PrefixCounter
from quail_engine.plan.cost import Work

log = logging.getLogger(__name__)
WAVE_CHUNK = 512  # prompts tokenized at a time while a generating batch is sized in waves


class BatchPipeline:
    """The batches of one call of `runner` (an OpRunner: its engine, PromptText, BatchSizer
    and report) over `layout` read by `readout`, its documents in `kv` where the layout shares
    them; `rep` the operator's report, `minimum` its PrefixCounter across calls."""

    def __init__(self, runner, layout: OpPrompt, readout, kv: DocKV | None, rep,
                 minimum: PrefixCounter):
        self.runner, self.layout, self.readout, self.kv, self.rep = (
            runner, layout, readout, kv, rep)
        self.minimum = minimum
        self.uses_kv = runner.uses_kv(layout, kv)
        self.releasable: list[str] = []  # documents the engine's worker releases next
        self.engine_s = 0.0  # engine seconds of the call's batches
        self.shortened = False  # an answer got fewer tokens than it asked for (warned once)

    def run(self, texts: list[tuple[str, str]], done, release_done: bool = False,
            ahead=None) -> None:
        """Batches through the engine with the host one batch ahead: while the engine (its one
        worker thread, engine_thread.py) runs batch N, this thread tokenizes batch N+1 and then
        counts and hands over batch N-1's answers (`done(lo, hi, answers)`), so the device does
        not wait for the host between batches. With `release_done`, a document whose rows are
        all answered is released by the worker before its next batch (the worker alone touches
        the engine). `ahead` runs once, when the first batch's answers are back (the second is
        then running): not beside the first, whose encoding of the call's documents is the
        launch-heavy part (a helper thread preparing the next chunk beside it slows those
        passes); in a call of one batch, as it is handed over (the alternative is the engine
        waiting for it all)."""
        runner, rep, sizer = self.runner, self.rep, self.runner.sizer
        remaining = Counter(p for p, _ in texts) if release_done else None
        waited, batches = 0.0, 0
        pending = None
        in_flight: list = []
        streams = self._streams()
        try:
            lo = 0
            while lo < len(texts) or pending is not None:
                submitted = None
                if lo < len(texts):
                    tokens = prompt_tokens(texts[lo:lo + 64], self.uses_kv, runner.engine)
                    rows = sizer.batch_prompts(tokens, rep.op)
                    waved = self._decode_waves(texts, lo, rows)
                    if waved is not None:
                        hi = lo + waved
                    else:
                        decode = sizer.decode_rows(runner.engine, self.readout, tokens)
                        hi = lo + max(rows, decode)
                        # a generating call's last rows, fewer than one wave of answers, join
                        # this batch: a batch of them alone would run its every decode step
                        # (reading every weight) for a few rows, after this one's
                        if decode > 1 and len(texts) - hi < decode // sizer.batching.decode_waves:
                            hi = len(texts)
                    guess = (min(hi, len(texts)) - lo) * tokens
                    prepared = self._prepare(texts[lo:hi])
                    if streams:  # (its requests, offered to the batch in flight: below)
                        prepared = (*prepared[:3], self._whole(texts[lo:hi], *prepared[:2]))
                        if pending is not None and self._lengths_vary():
                            runner.engine.offer(prepared[3])
                    submitted = (lo, min(hi, len(texts)), guess, engine_thread.submit(
                        self._execute, texts[lo:hi], prepared, into=in_flight))
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
                    sizer.batch_finished(rep.op, p_guess)
                    if ahead is not None:
                        ahead()
                        ahead = None
                    self._count_minimum(texts[p_lo:p_hi], requests)
                    done(p_lo, p_hi, answers)
                    if remaining is not None:
                        for p, _ in texts[p_lo:p_hi]:
                            remaining[p] -= 1
                            if not remaining[p]:
                                self.releasable.append(p)
                pending = submitted
        except KeyboardInterrupt:
            self._stop_engine(in_flight)
            raise
        finally:  # nothing of this call may still run on the engine once it returns or raises
            wait(in_flight)
            if streams:  # (what a failed call had started of a batch that will not run)
                engine_thread.submit(runner.engine.drop_carried).result()
        rep.engine_s += self.engine_s
        rep.host_wait_s += waited
        log.info("%s: %d prompts in %d batches, engine %.2f s, host waited %.2f s for it",
                 self.layout.op.op, len(texts), batches, self.engine_s, waited)

    def _stop_engine(self, in_flight: list) -> None:
        """Ctrl-C: batches not started are dropped and the running one stops at the engine's
        next forward pass or layer (infer/interrupt.py), so control comes back within about a
        second instead of after the batches in flight."""
        for future in in_flight:
            future.cancel()
        engine = self.runner.loaded_engine()
        interrupt = getattr(engine, "interrupt", None)
        if interrupt is None:
            return
        interrupt()
        try:
            wait(in_flight)
        finally:
            engine.resume()

    def _decode_waves(self, texts: list[tuple[str, str]], lo: int, rows: int) -> int | None:
        """Rows of the generating batch from `lo` in whole waves of the engine's decode arena
        (batch_sizing.whole_waves), counted from the prompts' own tokens, which the batch's
        preparation then reads from the token store; None where the answers are not generated
        from whole prompts or the engine's KV is unbounded (the batch is sized as the sizer's
        decode_rows says)."""
        engine = self.runner.engine
        if self.uses_kv or not isinstance(self.readout, GenerateReadout) or \
                getattr(engine, "decode_capacity", None) is None:
            return None
        capacity = engine.decode_capacity()
        if capacity is None:
            return None
        longest, reserved = self._answer_lengths()
        text, answer = self.runner.text, longest if reserved is None else reserved
        sizer, limit = self.runner.sizer, engine.max_context
        needs: list[int] = []
        while lo + len(needs) < len(texts):
            chunk = texts[lo + len(needs):lo + len(needs) + WAVE_CHUNK]
            heads = text.heads([p for p, _ in chunk])
            tails = text.tails([s for _, s in chunk])
            needs += engine.decode_pages([min(len(h) + len(t) + answer, limit)
                                          for h, t in zip(heads, tails)])
            taken = whole_waves(needs, capacity[0], rows, sizer.batching.decode_waves)
            if taken is not None:
                return min(taken, sizer.batch_size)
        return min(len(needs), sizer.batch_size)

    def _streams(self) -> bool:
        """Whether this call's batches are offered to the engine while the batch before runs
        (engine.offer: generated answers of whole prompts on an engine whose decode arena is
        bounded), so the next batch's answers start as the running one's last answers end,
        instead of the arena draining to its longest answer first (QUAIL_DECODE_STREAM=0:
        never)."""
        engine = self.runner.engine
        capacity = getattr(engine, "decode_capacity", None)
        return (os.environ.get("QUAIL_DECODE_STREAM", "1") != "0"
                and not self.uses_kv and isinstance(self.readout, GenerateReadout)
                and getattr(engine, "offer", None) is not None
                and getattr(engine, "drop_carried", None) is not None
                and capacity is not None and capacity() is not None)

    def _lengths_vary(self) -> bool:
        """Whether recent answers of this kind ended before max_tokens (the engine reserves
        less than max_tokens for them: answer_reserve), so a batch's answers end apart and its
        last steps would run for its longest few. Answers that all run to max_tokens end
        together, wave by wave: the next batch then gains nothing from starting early, and its
        small admissions' prefill passes and the hand-over cost GPU time. An engine that
        keeps no recent lengths is offered every batch."""
        longest, reserved = self._answer_lengths()
        return reserved is None or reserved < longest

    def _answer_lengths(self) -> tuple[int, int | None]:
        """(an answer's tokens as capped, as the engine's decode loop sees them; what the
        engine reserves for one, from what recent answers of the kind took: `answer_reserve`,
        None where the engine keeps no such lengths)."""
        answer = self.runner.answer_tokens(self.readout)
        reserve = getattr(self.runner.engine, "answer_reserve", None)
        if reserve is None:
            return answer, None
        return answer, min(answer, reserve(answer, self.readout.stop, self.readout.grammar))

    def _prepare(self, texts: list[tuple[str, str]]):
        """Host side of a batch: token ids of its questions and documents (a shared document's
        ids go to its DocKV), so the engine's thread never tokenizes -> (heads, tails,
        truncated, requests: None, or the batch's requests where they are built here)."""
        text, kv = self.runner.text, self.kv
        tails = text.tails([s for _, s in texts])
        if self.uses_kv:
            before = kv.truncated
            kv.tokenize([p for p, _ in texts])
            return None, tails, kv.truncated - before, None
        return text.heads([p for p, _ in texts]), tails, 0, None

    def _execute(self, texts: list[tuple[str, str]], prepared
                 ) -> tuple[list[Answer], list[Request]]:
        """Engine side of a batch (runs on the pipeline's worker thread)."""
        runner, kv, rep, readout = self.runner, self.kv, self.rep, self.readout
        engine = runner.engine
        t0, fresh0 = time.perf_counter(), engine.stats.fresh_tokens
        mark = runner.report.timeline.engine_mark(engine)
        if kv is not None and self.releasable:
            done, self.releasable = self.releasable, []
            kv.release(done)
        heads, tails, truncated, built = prepared
        if truncated:  # (the host thread counts a streamed batch's, building its requests)
            rep.truncated += truncated
        reserve = runner.answer_tokens(readout)
        max_context = engine.max_context
        requests: list[Request] = []
        kv_hits = 0
        prefix_lens: list[int] = []
        if self.uses_kv:
            resident = set(kv.handles)
            kv.ensure([p for p, _ in texts])
            encoded_now: set[str] = set()
            for (p, question), tail in zip(texts, tails):
                handle = kv.get(p)
                if p in resident or p in encoded_now:
                    kv_hits += handle.num_tokens
                encoded_now.add(p)
                tail, budget = fit_request(tail[len(kv.stem):], handle.num_tokens, reserve,
                                           max_context, rep, runner.on_long)
                requests.append(Request(tuple(tail), self._within(
                    _for_question(readout, question), budget, reserve,
                    handle.num_tokens + len(tail)), handle))
                prefix_lens.append(handle.num_tokens)
            rep.work = rep.work + kv.take_work()
        else:
            requests = built if built is not None else self._whole(texts, heads, tails)
            prefix_lens = [0] * len(requests)
        rep.work = rep.work + batch_work(prefix_lens, [len(r.tokens) for r in requests])
        reasked0 = getattr(engine, "reasked", 0)  # a ReaskingEngine's (infer/reask.py)
        answers = engine.run(requests)
        rep.reasked += getattr(engine, "reasked", 0) - reasked0
        runner.report.timeline.engine_batch(rep.op, mark, engine)
        rep.kv_hit_tokens += kv_hits
        seconds = time.perf_counter() - t0
        self.engine_s += seconds
        runner.sizer.observe(engine.stats.fresh_tokens - fresh0, seconds)
        return answers, requests

    def ask_reference(self, texts: list[tuple[str, str]]) -> list[Answer]:
        """`texts` asked again, each prompt whole, at the re-ask band's reference precision
        (the engine's `ask_reference`, infer/reask.py), in one engine call: for a value put
        together from several answers, whose closeness to the SQL's numbers only the caller
        that combines them can judge (a similarity's mean of its two directions)."""
        heads, tails, _, _ = self._prepare(texts)
        requests = self._whole(texts, heads, tails)
        return engine_thread.submit(self.runner.engine.ask_reference, requests).result()

    def _whole(self, texts: list[tuple[str, str]], heads: list[list[int]],
               tails: list[list[int]]) -> list[Request]:
        """Requests of whole prompts (document and question, no resident prefix), each cut to
        the context less its answer's tokens."""
        runner, rep, readout = self.runner, self.rep, self.readout
        limit = runner.engine.max_context
        reserve = runner.answer_tokens(readout)
        requests = []
        for (_, question), head, tail in zip(texts, heads, tails):
            tokens, budget = fit_request(head + tail, 0, reserve, limit, rep, runner.on_long)
            requests.append(Request(tuple(tokens), self._within(
                _for_question(readout, question), budget, reserve, len(tokens))))
        return requests

    def _within(self, readout, budget: int, requested: int, prompt: int):
        """`readout` generating at most `budget` tokens; the call's first answer given fewer
        than its `requested` tokens is warned about, once, naming the limit."""
        if budget < requested and not self.shortened:
            self.shortened = True
            engine = self.runner.engine
            log.warning("%s: a prompt of %d tokens and %d requested output tokens exceed the "
                        "context of %r (%d tokens); its answer gets the %d tokens the context "
                        "leaves (each row's prompt leaves its own), and may stop earlier",
                        self.layout.op.op, prompt, requested,
                        getattr(engine, "model_id", "the model"), engine.max_context, budget)
        return within_budget(readout, budget)

    def _count_minimum(self, texts: list[tuple[str, str]], requests: list[Request]) -> None:
        """Add a batch's new minimum tokens and attention pairs (infer/radix.PrefixCounter) to
        the report, on the host thread while the engine runs the next batch: a row over a
        resident document counts as the document's tokens (once) and its own after them, never
        concatenated (a join's pairs would copy and compare its long anchors once per pair,
        with the GPU idle)."""
        new, pairs = self.minimum.add([r.tokens for r in requests if r.prefix is None])
        after: dict[str, list[tuple[int, ...]]] = {}
        for (p, _), r in zip(texts, requests):
            if r.prefix is not None:
                after.setdefault(p, []).append(r.tokens)
        for p, tails in after.items():
            n, q = self.minimum.add_after(self.kv.heads[p] + self.kv.stem, tails)
            new, pairs = new + n, pairs + q
        self.rep.minimum_tokens += new
        self.rep.minimum_attention_pairs += pairs


def _for_question(readout, question: str):
    """The readout of a request asking `question`: `readout`, or its entry when it is a dict
    by question (yes/no label decisions, each label calibrated on its own)."""
    return readout[question] if isinstance(readout, dict) else readout


def batch_work(prefix_lens: Sequence[int], own_lens: Sequence[int]) -> Work:
    """Work of requests of `own_lens` tokens over resident prefixes of `prefix_lens` (the sum
    of plan.cost.request_work over them, without a Work object per request)."""
    fresh = pairs = reads = 0.0
    for p, s in zip(prefix_lens, own_lens):
        fresh += s
        pairs += s * p + s * (s + 1) / 2
        reads += p
    return Work(fresh_tokens=fresh, attention_pairs=pairs, kv_reads=reads)
