"""Greedy decode with the KV cache equals transformers' greedy generate, token for token."""

from __future__ import annotations

import pytest
import torch
from conftest import WordTokenizer

from quail_engine.infer.api import GenerateReadout, Request
from quail_engine.infer.decode import DecodeSeq, cut_at_stop, greedy_decode


def hf_greedy(hf, prompt, max_new, eos=1):
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), max_new_tokens=max_new, do_sample=False,
                          eos_token_id=eos, pad_token_id=0)
    new = out[0, len(prompt):].tolist()
    return new[:new.index(eos)] if eos in new else new


def prompts(lengths, seed=21):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, 128, (n,), generator=g).tolist() for n in lengths]


@pytest.mark.parametrize("lengths, max_new", [([5], 12), ([3, 14, 8, 1], 10), ([30, 2], 20)])
def test_batched_decode_equals_transformers_generate(tiny_llama, engine, lengths, max_new):
    hf, _, _ = tiny_llama
    ps = prompts(lengths)
    seqs = [DecodeSeq(p, max_tokens=max_new) for p in ps]
    greedy_decode(engine.runner, seqs, {1}, engine.codec.decode)
    for s, p in zip(seqs, ps):
        assert s.out_tokens == hf_greedy(hf, p, max_new)
        assert s.finish in ("eos", "length")


def test_decode_with_shared_prefix_equals_flat(tiny_llama, engine):
    hf, _, _ = tiny_llama
    head, a, b = prompts([20, 4, 9], seed=22)
    handle = engine.add_prefix(head)
    seqs = [DecodeSeq(a, engine.arena.get(handle.id), 10), DecodeSeq(b, engine.arena.get(handle.id), 10)]
    greedy_decode(engine.runner, seqs, {1}, engine.codec.decode)
    assert seqs[0].out_tokens == hf_greedy(hf, head + a, 10)
    assert seqs[1].out_tokens == hf_greedy(hf, head + b, 10)
    assert engine.arena.get(handle.id).num_tokens == 20   # the shared prefix did not grow


def test_generate_readout_text_and_stop_string(tiny_llama, engine):
    hf, _, _ = tiny_llama
    p = prompts([6], seed=23)[0]
    expected = hf_greedy(hf, p, 8)
    assert len(expected) >= 4
    text = WordTokenizer().decode(expected)
    full = engine.run([Request(tuple(p), GenerateReadout(max_tokens=8))])[0]
    assert full.value == text
    stop = WordTokenizer().decode(expected[2:4])
    cut = engine.run([Request(tuple(p), GenerateReadout(max_tokens=8, stop=(stop,)))])[0]
    assert cut.value == text[:text.find(stop)]
    decode_before = engine.stats.decode_tokens
    engine.run([Request(tuple(p), GenerateReadout(max_tokens=3))])
    assert engine.stats.decode_tokens - decode_before == 2   # first token comes from the prefill


@pytest.mark.parametrize("text, stop, expected", [
    ("hello world", (), ("hello world", False)),
    ("hello world", ("o w",), ("hell", True)),
    ("a;b.c", (".", ";"), ("a", True)),
    ("abc", ("",), ("abc", False)),
])
def test_cut_at_stop(text, stop, expected):
    assert cut_at_stop(text, stop) == expected


def test_zero_max_tokens_generates_nothing(engine):
    seqs = [DecodeSeq([5, 6], max_tokens=0)]
    greedy_decode(engine.runner, seqs, {1}, engine.codec.decode)
    assert seqs[0].out_tokens == [] and seqs[0].finish == "length"


def _short_answers_seen(max_tokens: int, n: int = 40):
    """AnswerLengths that has seen `n` answers of one token: it reserves two for the next."""
    from quail_engine.infer.decode import AnswerLengths

    lengths = AnswerLengths()
    seen = [DecodeSeq([2], max_tokens=max_tokens) for _ in range(n)]
    for s in seen:
        s.out_tokens, s.finish = [3], "eos"
    lengths.record(seen)
    assert lengths.answer_tokens(max_tokens) == 2
    return lengths


def test_preempted_answers_are_recomputed_to_the_same_tokens(tiny_llama, engine):
    """Admitted with room for two answer tokens each (the recent answers were one token long),
    answers that run to ten grow their reservations; the small arena cannot hold them all, so
    the latest admitted are preempted (their KV dropped) and recomputed later from their prompt
    and answer so far. Every answer is still transformers' greedy continuation."""
    hf, _, _ = tiny_llama
    ps = prompts([5, 9, 3, 7, 6, 4, 8], seed=24)

    seqs = [DecodeSeq(p, max_tokens=10) for p in ps]

    def room():  # an arena of 20 pages of 4 tokens, less the running answers' KV
        used = sum(-(-(len(s.tokens) + len(s.out_tokens) - s.prompt_out) // 4)
                   for s in seqs if s.reserved and not s.finish)
        return (20 - used) * 4, 4

    before = engine.stats.preemptions
    greedy_decode(engine.runner, seqs, {1}, engine.codec.decode, room=room,
                  lengths=_short_answers_seen(10))
    assert engine.stats.preemptions - before > 0
    for s, p in zip(seqs, ps):
        assert s.out_tokens == hf_greedy(hf, p, 10)
        assert s.finish in ("eos", "length")


def test_make_room_preempts_the_latest_admitted_plain_answers():
    """Growing one reservation past the arena preempts the latest admitted answers without a
    grammar, never the last one running; a preempted answer waits with its answer so far
    appended to its prompt, counted once."""
    from quail_engine.infer.decode import _make_room

    seqs = [DecodeSeq([1] * 8, max_tokens=16, reserved=2, admitted_at=k) for k in range(4)]
    seqs[3].grammar = object()  # (latest admitted, but under a grammar: kept)
    seqs[3].reserved = 16
    for s in seqs:
        s.out_tokens = [5, 6]
    released = []

    def room():  # 10 free pages of 4 tokens
        return 40, 4

    out = _make_room(seqs, lambda s: len(s.out_tokens) + 1, room, 2, released.append)
    # every plain answer outgrows its reservation (3 tokens fed, 2 reserved): each doubled to
    # 4, 2 more tokens in 0 + 2 pages; the grammar's 14 more take 3 + 2: 5 + 3 * 2 > 10 pages,
    # and without the latest plain answer 5 + 2 * 2 fit
    assert [s.admitted_at for s in out] == [2] and released == out
    assert out[0].tokens == [1] * 8 + [5, 6] and out[0].prompt_out == 2 and out[0].reserved == 0
    assert [s.reserved for s in seqs[:2]] == [4, 4]


def test_answer_lengths_reserve_the_recent_answers_with_a_margin():
    from quail_engine.infer.decode import AnswerLengths

    lengths = AnswerLengths()
    seqs = [DecodeSeq([2], max_tokens=64) for _ in range(40)]
    for k, s in enumerate(seqs):
        s.out_tokens, s.finish = [3] * (k % 20 + 1), "eos"
    assert lengths.answer_tokens(64) == 64  # nothing seen yet: max_tokens
    lengths.record(seqs[:10])
    assert lengths.answer_tokens(64) == 64  # too few seen
    lengths.record(seqs[10:])
    assert lengths.answer_tokens(64) == 23  # 90th percentile 18, a quarter more
    assert lengths.answer_tokens(64, grammar=object()) == 64
    assert lengths.answer_tokens(32) == 32  # another kind of answer
    runs = [DecodeSeq([2], max_tokens=64) for _ in range(40)]
    for s in runs:  # answers that run to max_tokens (random weights') keep it reserved
        s.out_tokens, s.finish = [3] * 64, "length"
    lengths.record(runs)
    assert lengths.answer_tokens(64) == 64
