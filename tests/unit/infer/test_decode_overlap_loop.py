"""The overlapped decode loop (infer/decode_overlap.py) on the embedded writer (real weights,
CPU, float32): grammar answers, stop strings and plain answers in one batch, admitted in waves
into a small room, give the same texts and finishes as the step-by-step loop
(decode.greedy_decode), although each sequence's end is read a step late.

The CPU runner stores each step's KV apart and joins it (a new KV object per step); the
overlapped loop holds each sequence's KV handle and expects it to grow in place, as the GPU
runner's does: `InPlace` gives the CPU runner that interface (decode_next) over boxes whose
content each step replaces."""

from __future__ import annotations

import json

import pytest
from test_grammar_decode import OBJECT, TEXTS

from quail_engine.infer.api import Grammar

pytestmark = pytest.mark.model


class Box:
    def __init__(self, kv):
        self.kv = kv


class InPlace:
    """A CPU Runner with the GPU runner's decode interface: a sequence's KV is a Box whose
    content each decode step replaces (as the GPU arena grows a prefix in place)."""

    decode_overlap = True

    def __init__(self, runner):
        self.inner = runner
        self.stats = getattr(runner, "stats", None)
        self.steps = []  # rows per decode step

    def run(self, jobs, count_as_decode=False):
        self.inner.run(jobs, count_as_decode)
        for job in jobs:
            if job.store_kv:
                job.kv = Box(job.kv)

    def decode_next(self, prefixes, ids, keep=(), staged=None):
        import torch

        from quail_engine.infer.runner import SeqJob

        jobs = [SeqJob(tokens=[int(t)], prefix=box.kv, store_kv=True, on_device=True)
                for box, t in zip(prefixes, ids.tolist())]
        self.inner.run(jobs, count_as_decode=True)
        for box, job in zip(prefixes, jobs):
            box.kv = job.kv
        logits = torch.stack([job.logits[-1] for job in jobs])
        self.steps.append(len(jobs))
        return logits.argmax(dim=-1), (logits[list(keep)] if keep else None)


class Staging(InPlace):
    """InPlace with the GPU runner's `decode_stage`: the loop stages each step's sequences
    while the grammars' masks are computed, and must launch that step over the same ones."""

    def __init__(self, runner):
        super().__init__(runner)
        self.staged = 0

    def decode_stage(self, prefixes):
        return tuple(map(id, prefixes))

    def decode_next(self, prefixes, ids, keep=(), staged=None):
        assert staged == tuple(map(id, prefixes)), "a step launched over other sequences"
        self.staged += 1
        return super().decode_next(prefixes, ids, keep, None)


@pytest.fixture(scope="module")
def engine(require_embedded):
    require_embedded("smollm2-135m")
    import torch

    from quail_engine.infer.engine import LocalEngine

    return LocalEngine.load("smollm2-135m", dtype=torch.float32)


def _seqs(engine):
    from quail_engine.infer.decode import DecodeSeq

    obj = Grammar(json.dumps(OBJECT))
    seqs = []
    for t in TEXTS:
        head, tail = engine.chat_split(f"{t}\n\nExtract a JSON object with keys name and city.",
                                       "")
        seqs.append(DecodeSeq(head + tail, max_tokens=40, grammar=obj))
        head, tail = engine.chat_split(f"{t}\n\nSummarize in a few words.", "")
        seqs.append(DecodeSeq(head + tail, max_tokens=12))
        seqs.append(DecodeSeq(head + tail, max_tokens=30, stop=(" ",)))
    return seqs


@pytest.mark.parametrize("shim", [InPlace, Staging])
def test_overlapped_loop_answers_as_the_step_by_step_loop(engine, shim):
    from quail_engine.infer.decode import greedy_decode
    from quail_engine.infer.decode_overlap import overlappable, overlapped_decode

    page = 16

    def room():  # a fake arena's free room: about two answers beside the running ones
        return 2 * (100 // page + 2) * page, page

    want, got = _seqs(engine), _seqs(engine)
    masks = engine._grammar_masks()
    stats = engine.stats
    before = stats.decode_tokens
    greedy_decode(engine.runner, want, engine.codec.eos_ids, engine.codec.decode, masks, room)
    decoded, before = stats.decode_tokens - before, stats.decode_tokens
    runner = shim(engine.runner)
    assert overlappable(runner, got)
    vain = stats.vain_decode_tokens
    overlapped_decode(runner, got, engine.codec.eos_ids, engine.codec.decode, masks, room)
    # the answers' tokens fed back are the same; at most one step in vain per sequence that
    # ended otherwise than by length (none for one that ended on its last allowed token)
    assert stats.decode_tokens - before == decoded
    ended = [s for s in got if s.finish != "length" and len(s.out_tokens) + 1 < s.max_tokens]
    assert len(ended) <= stats.vain_decode_tokens - vain <= sum(s.finish != "length" for s in got)
    assert [(s.text, s.finish, s.out_tokens) for s in got] == \
        [(s.text, s.finish, s.out_tokens) for s in want]
    assert {s.finish for s in want} >= {"grammar", "stop", "length"}
    assert all(json.loads(s.text).keys() == {"name", "city"} for s in got if s.grammar)
    assert max(runner.steps) < len(got)  # admitted in waves, never all at once
    assert getattr(runner, "staged", len(runner.steps)) == len(runner.steps)


def test_a_repetition_penalty_keeps_the_step_by_step_loop():
    from quail_engine.infer.decode import DecodeSeq
    from quail_engine.infer.decode_overlap import overlappable

    runner = InPlace(None)
    seqs = [DecodeSeq([1, 2], max_tokens=4), DecodeSeq([1], max_tokens=4, stop=("x",))]
    assert overlappable(runner, seqs)
    seqs[1].repetition_penalty = 1.2
    assert not overlappable(runner, seqs)
    runner.decode_overlap = False
    assert not overlappable(runner, seqs[:1])


class Guarded:
    """An llguidance matcher that refuses to be read by any thread but the grammars' helper
    while the helper computes its mask (as llguidance itself refuses a matcher another thread
    has borrowed, but every time rather than when the two calls happen to meet)."""

    held: set[int] = set()

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        import threading

        if id(self) in Guarded.held and \
                not threading.current_thread().name.startswith("quail-grammar"):
            raise RuntimeError(f"the decode loop read a matcher ({name}) the helper holds")
        return getattr(self.inner, name)


def test_the_loop_leaves_a_matcher_alone_while_the_helper_masks_it(engine):
    """The helper takes each step's tokens and goes straight on to the next masks while the
    loop ends sequences and admits new ones: the loop must read what the helper reported
    (taken, grammar stopped), never the matchers themselves, until the masks are in. Each mask
    computation here holds its matchers for a while, so a read in that window fails."""
    import time

    from quail_engine.infer.decode import greedy_decode
    from quail_engine.infer.decode_overlap import overlapped_decode
    from quail_engine.infer.grammar import GrammarMasks

    class SlowGuardedMasks(GrammarMasks):
        def matcher(self, grammar, width):
            return Guarded(super().matcher(grammar, width))

        def consume(self, steps):
            return super().consume([(m.inner, t) for m, t in steps])

        def _masks(self, matchers, buffer=1):
            Guarded.held.update(map(id, matchers))
            try:
                time.sleep(0.05)
                return super()._masks([m.inner for m in matchers], buffer)
            finally:
                Guarded.held.difference_update(map(id, matchers))

    page = 16

    def room():
        return 2 * (100 // page + 2) * page, page

    want, got = _seqs(engine), _seqs(engine)
    masks = SlowGuardedMasks(engine.codec.tokenizer, engine.codec.eos_ids)
    greedy_decode(engine.runner, want, engine.codec.eos_ids, engine.codec.decode,
                  engine._grammar_masks(), room)
    overlapped_decode(Staging(engine.runner), got, engine.codec.eos_ids, engine.codec.decode,
                      masks, room)
    assert [(s.text, s.finish) for s in got] == [(s.text, s.finish) for s in want]
    assert masks.wait_s > 0  # the loop did wait on masks the helper was computing


def test_preempted_answers_decode_as_uninterrupted_ones(engine):
    """Admitted with room for two answer tokens (the recent answers of their kinds were one
    token long), the plain answers outgrow their reservations and, the arena being small,
    the latest admitted are preempted, their step in flight dropped with their KV, and
    recomputed later from prompt and answer so far: real weights, float32, and every answer
    the same as the step-by-step loop's without preemption. Grammar answers keep max_tokens
    reserved and are never preempted."""
    from quail_engine.infer.decode import AnswerLengths, DecodeSeq, greedy_decode
    from quail_engine.infer.decode_overlap import overlapped_decode

    page, pages = 16, 40
    want, got = _seqs(engine), _seqs(engine)
    lengths = AnswerLengths()
    seen = [DecodeSeq([2], max_tokens=s.max_tokens, stop=s.stop) for s in got for _ in range(40)
            if s.grammar is None]
    for s in seen:
        s.out_tokens, s.finish = [3], "eos"
    lengths.record(seen)
    assert lengths.answer_tokens(12) == 2

    def room():  # the arena less the running answers' KV
        used = sum(-(-(len(s.tokens) + len(s.out_tokens) - s.prompt_out) // page)
                   for s in got if s.reserved and not s.finish)
        return (pages - used) * page, page

    masks = engine._grammar_masks()
    greedy_decode(engine.runner, want, engine.codec.eos_ids, engine.codec.decode, masks)
    before = engine.stats.preemptions
    overlapped_decode(InPlace(engine.runner), got, engine.codec.eos_ids, engine.codec.decode,
                      masks, room, lengths=lengths)
    assert engine.stats.preemptions - before > 0
    assert [(s.text, s.finish, s.out_tokens) for s in got] == \
        [(s.text, s.finish, s.out_tokens) for s in want]
    # (recomputed: answer tokens in their prompts; the grammar answers never were)
    assert any(s.prompt_out for s in got if s.grammar is None)
    assert all(s.prompt_out == 0 for s in got if s.grammar is not None)
