"""LocalEngine's generation: GenerateReadout requests decoded greedily by the decode loops
(infer/decode.py, or infer/decode_overlap.py where the runner can stage steps), under their
grammars' masks, with prompts that begin alike prefilled once through the prefix cache."""

from __future__ import annotations

import os
import weakref
from collections import deque
from collections.abc import Sequence
from functools import partial
from typing import Any

from quail_engine.infer.api import Answer, EngineStats, GenerateReadout, Request
from quail_engine.infer.decode import (
    AnswerLengths,
    Carry,
    DecodeSeq,
    fitting,
    force_starts,
    greedy_decode,
    sequence_pages,
)
from quail_engine.infer.decode_overlap import overlappable, overlapped_decode
from quail_engine.infer.kv_pages import cpu_kv_bytes_per_token
from quail_engine.infer.prefix_cache import PrefixCache
from quail_engine.infer.runner import Runner, SeqJob
from quail_engine.infer.textio import TextCodec

# A CPU decode step reads every weight whatever its rows, so answers decoded together cost
# little more a step than one does: where the KV is unbounded (the CPU's), a generating batch
# holds at least decode_waves (the batching's) times this many answers, decoding at once; fewer where
# this many would need more than CPU_DECODE_KV_BYTES of float32 KV (long prompts), so a batch's
# KV stays within decode_waves times that.
CPU_DECODE_ROWS = 16
CPU_DECODE_KV_BYTES = 1 << 30


def reserve_expected() -> bool:
    """Whether a bounded arena admits answers with the room recent answers needed rather than
    max_tokens (decode.AnswerLengths; QUAIL_DECODE_RESERVE=full: always max_tokens, no
    preemption)."""
    return os.environ.get("QUAIL_DECODE_RESERVE", "expected") != "full"


class Generation:
    """LocalEngine's part that decodes generated answers; LocalEngine.__init__ sets the
    attributes below."""

    runner: Runner
    stats: EngineStats
    codec: TextCodec
    prefix_cache: PrefixCache | None
    track_decode_margins: bool
    _grammars: Any
    _decode_holds: list[tuple[weakref.ref, tuple]]
    _decode_room_start: tuple[int, int] | None
    _offer_lock: Any
    _offered: list[Request]
    _carry: Carry | None
    _started: dict[Request, deque]
    _streamed: bool
    max_context: int

    def _generate(self, requests: Sequence[Request], prefixes: Sequence[Any]) -> list[Answer]:
        carry, begun = self._take_carry(requests)
        seqs = [begun.pop(k, None) or self._decode_seq(r, p)
                for k, (r, p) in enumerate(zip(requests, prefixes))]
        overlapped = overlappable(self.runner, seqs)
        if carry is not None and carry.loop != ("overlapped" if overlapped else "greedy"):
            carry = None  # (another loop's state: those answers start again)
            seqs = [self._decode_seq(r, p) for r, p in zip(requests, prefixes)]
        grammars = self._grammar_masks() if any(s.grammar for s in seqs) else None
        width = self._logits_width()
        # (QUAIL_FORCED_TOKENS=0: every forced token its own decode step, for comparison)
        forced = grammars is not None and os.environ.get("QUAIL_FORCED_TOKENS", "1") != "0"
        if forced and width:
            self.stats.forced_tokens += force_starts(seqs, grammars, width, self.codec.decode)
        room = self._decode_room()
        lengths = more = None
        if room is not None:
            if carry is None:  # (with a carry running, the room is not the whole arena's)
                self._decode_room_start = room()
            lengths = self._answer_lengths() if reserve_expected() else None
            if grammars is None:  # (the next call's plain answers may start as these end)
                more = partial(self._more, overlapped)
        args = (self.runner, seqs, self.codec.eos_ids, self.codec.decode, grammars, room,
                self._decode_prefill())
        if overlapped:
            self._carry = overlapped_decode(*args, lengths=lengths, more=more, carry=carry)
        else:
            self._carry = greedy_decode(*args, forced=forced, lengths=lengths, more=more,
                                        carry=carry)
        return [Answer(value=s.text if s.complete else None,
                       margin=s.margin if s.track_margin else None) for s in seqs]

    def _decode_seq(self, r: Request, prefix: Any) -> DecodeSeq:
        return DecodeSeq(list(r.tokens), prefix, r.readout.max_tokens, tuple(r.readout.stop),
                         repetition_penalty=r.readout.repetition_penalty,
                         grammar=r.readout.grammar, track_margin=self.track_decode_margins)

    # -- the next call's answers, started as this call's end ----------------------------------
    def offer(self, requests: Sequence[Request]) -> None:
        """The next generating call's requests (equal to those it will run), from the host's
        thread while this call decodes: once this call's answers are all admitted, plain
        answers among them start decoding as this call's end, where the arena would otherwise
        drain to this call's longest answers with the next call waiting (GPU engines: a
        bounded arena). That call takes up what was started (each answer the greedy
        continuation of its prompt, decoded beside other rows than in its own call: on a GPU the
        same batch-layout rounding as any batching, bench/results/determinism.md); an empty
        offer withdraws it."""
        with self._offer_lock:
            self._offered = list(requests)

    def drop_carried(self) -> None:
        """Forget the offer and what was started of it (its KV goes back to the arena): the
        call it was for will not come (the caller's batches ended or failed)."""
        with self._offer_lock:
            self._offered = []
        self._carry, self._started = None, {}

    def _more(self, overlapped: bool) -> list[DecodeSeq]:
        """The offered requests as seqs to decode now (taken once), where every one is a
        whole plain prompt whose answer fits the context (else none: they run in their call)."""
        with self._offer_lock:
            offered, self._offered = self._offered, []
        if not offered or not all(self._streamable(r, overlapped) for r in offered):
            return []
        seqs = []
        self._streamed = True
        for r in offered:
            s = self._decode_seq(r, None)
            self._started.setdefault(r, deque()).append(s)
            seqs.append(s)
        return seqs

    def _streamable(self, r: Request, overlapped: bool) -> bool:
        ro = r.readout
        return (isinstance(ro, GenerateReadout) and r.prefix is None and ro.grammar is None
                and 0 < len(r.tokens) and len(r.tokens) + ro.max_tokens <= self.max_context
                and (ro.repetition_penalty == 1.0 or not overlapped))

    def _take_carry(self, requests: Sequence[Request]) -> tuple[Carry | None, dict[int, Any]]:
        """What the last call started of this call's `requests` -> (its Carry, filtered to
        them, or None; the started seq of each request by position). Anything else started is
        dropped, and an offer of these very requests withdrawn."""
        carry, started = self._carry, self._started
        self._carry, self._started = None, {}
        with self._offer_lock:
            if self._offered and self._offered[0] in requests:  # (compared until one is equal)
                self._offered = []
        if carry is None:
            return None, {}
        begun: dict[int, Any] = {}
        for k, r in enumerate(requests):
            queue = started.get(r)
            if queue:
                begun[k] = queue.popleft()
        self._streamed = True
        mine = {id(s) for s in begun.values()}
        carry.running = [(s, state) for s, state in carry.running if id(s) in mine]
        carry.waiting = [s for s in carry.waiting if id(s) in mine]
        carry.done = [s for s in carry.done if id(s) in mine]
        return (carry if begun else None), begun

    def _answer_lengths(self) -> AnswerLengths:
        """The recent answers' lengths admission reserves by (kept across calls: an operator's
        later batches admit as its earlier answers ran)."""
        lengths = getattr(self, "_lengths", None)
        if lengths is None:
            lengths = self._lengths = AnswerLengths()
        return lengths

    def answer_reserve(self, max_tokens: int, stop: Sequence[str] = (), grammar: Any = None
                       ) -> int:
        """The answer tokens the decode loop holds KV room for when it admits an answer of at
        most `max_tokens` (recent answers' lengths: decode.AnswerLengths), for sizing batches
        in the waves it will decode in; `max_tokens` where the KV is unbounded."""
        if self._decode_room() is None or not reserve_expected():
            return max_tokens
        return self._answer_lengths().answer_tokens(max_tokens, stop, grammar)

    def _logits_width(self) -> int | None:
        """The width of the logits the decode loops read (the LM head's rows, which a
        grammar's masks must match), None where the runner's model does not say."""
        head = getattr(getattr(self.runner, "model", None), "lm_head", None)
        weight = getattr(head, "weight", head)
        return int(weight.shape[0]) if getattr(weight, "ndim", 0) == 2 else None

    def _decode_prefill(self):
        """The decode loops' prompt prefill with the prefix cache (None without one): the
        beginnings two or more admitted prompts share (a chat template's system text, the
        instruction before each row's document, few-shot examples) are computed once and
        indexed, and each prompt computes only what follows the longest cached chain of pages
        it begins with, in one pass. A sequence's KV then holds those pages by reference (its
        decode steps grow it in place after them, copying nothing)."""
        cache = self.prefix_cache
        if cache is None:
            return None
        bounded = self._decode_room() is not None

        def prefill(seqs: Sequence[DecodeSeq]) -> list[SeqJob]:
            fresh = [list(s.tokens) for s in seqs if s.prefix is None]
            jobs, chains = [], []
            try:
                if len(fresh) > 1:
                    cache.warm(self.runner, fresh, SeqJob)
                hits0 = cache.hit_tokens
                for s in seqs:
                    chain, prefix, start = [], s.prefix, 0  # (a prefix of its own: all fresh)
                    if s.prefix is None:
                        chain, prefix = cache.lookup(s.tokens)
                        start = prefix.num_tokens if prefix is not None else 0
                    jobs.append(SeqJob(tokens=list(s.tokens[start:]), prefix=prefix,
                                       store_kv=True, on_device=True))
                    chains.append(chain)
                self.stats.kv_hit_tokens += cache.hit_tokens - hits0
                self.runner.run(jobs)
            finally:
                cache.end_batch()
            if bounded:
                self._decode_holds += [(weakref.ref(job.kv), tuple(n.page for n in chain))
                                       for job, chain in zip(jobs, chains) if chain]
            return jobs
        return prefill

    def _decode_held_pages(self) -> int:
        """Cached pages that decoding sequences' KV holds: the index counts them, but evicting
        them frees nothing while that KV lives (its sequence running, or its last step still in
        flight)."""
        self._decode_holds = [(kv, pages) for kv, pages in self._decode_holds
                              if (held := kv()) is not None and held.refs > 0]
        return len({p for _, pages in self._decode_holds for p in pages})

    def expect_grammars(self, grammars: Sequence[Any]) -> None:
        """Answers under `grammars` are coming (the plan says so): their grammar machinery is
        built now on its helper thread (GrammarMasks.prepare), not when their first prompts
        wait for it. Called on the engine thread; returns at once."""
        width = self._logits_width()
        if grammars and width:
            self._grammar_masks().prepare(list(grammars), width)

    def _grammar_masks(self):
        if self._grammars is None:
            # (llguidance loads only for a constrained answer: plain runs never need it)
            from quail_engine.infer.grammar import GrammarMasks

            self._grammars = GrammarMasks(self.codec.tokenizer, self.codec.eos_ids)
        return self._grammars

    def decode_rows(self, prompt_tokens: int, max_tokens: int) -> int | None:
        """How many answers of `prompt_tokens` + `max_tokens` tokens decode at once: in the KV
        arena as it is now, or where the KV is unbounded (the CPU's) CPU_DECODE_ROWS within
        CPU_DECODE_KV_BYTES (a batch sized by its prompts' tokens alone held one answer on a
        CPU, and each decode step read all the weights for it); None where the model's
        shape is not known."""
        room = self._decode_room()
        if room is None:
            per_token = cpu_kv_bytes_per_token(getattr(self, "config", None))
            if not per_token:
                return None
            fits = CPU_DECODE_KV_BYTES // max(1, per_token * (prompt_tokens + max_tokens))
            return max(1, min(CPU_DECODE_ROWS, fits))
        free, page = room()
        return fitting(free, page, prompt_tokens + max_tokens, self.runner)

    def decode_capacity(self) -> tuple[int, int] | None:
        """(pages, page size) of the KV arena a generating batch decodes in, as it was when the
        last one began (a batch sized while another decodes would see that one's pages taken,
        and its size would follow the timing), else as it is now; None where the KV is
        unbounded (the CPU's)."""
        room = self._decode_room()
        if room is None:
            return None
        free, page = self._decode_room_start or room()
        return free // page, page

    def decode_pages(self, kv_tokens: Sequence[int]) -> list[int]:
        """The pages the decode loop reserves for each sequence of `kv_tokens` KV tokens
        (prompt and answer) when it admits it, in the arena decode_capacity describes."""
        page = self.decode_capacity()[1]
        return [sequence_pages(t, page, self.runner) for t in kv_tokens]

    def _decode_room(self):
        """(KV tokens a decode may still allocate, page size) as a callable, for an engine
        whose KV lives in a bounded arena; None: unbounded (the CPU's KV is the jobs' own
        memory)."""
        return None
