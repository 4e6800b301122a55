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
