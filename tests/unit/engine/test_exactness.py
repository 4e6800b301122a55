"""Packed and prefix-shared requests through the engine give transformers' logits (fp32)."""

from __future__ import annotations

import pytest
import torch
from conftest import hf_last_logits

from quail_engine.infer.api import BooleanReadout, Request
from quail_engine.infer.runner import SeqJob

RTOL = 1e-4


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def prompts(lengths, seed=1, vocab=128):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, vocab, (n,), generator=g).tolist() for n in lengths]


@pytest.mark.parametrize("lengths", [[1], [7], [5, 17, 1, 33, 9], [40] * 4, [3, 60, 2]])
@pytest.mark.parametrize("budget", [8, 64, 4096])
def test_packed_answer_logits_equal_transformers(tiny_llama, engine, lengths, budget):
    hf, _, _ = tiny_llama
    engine.runner.scheduler = type(engine.runner.scheduler)(token_budget=budget)
    vocab = (3, 5, 90, 11)
    jobs = [SeqJob(p, vocab=vocab) for p in prompts(lengths)]
    engine.runner.run(jobs)
    for job in jobs:
        ref = hf_last_logits(hf, list(job.tokens))[list(vocab)]
        assert job.logits.shape == (1, len(vocab))
        assert rel_err(job.logits[0], ref) <= RTOL


@pytest.mark.parametrize("prefix_len, suffix_lengths", [(1, [1, 4]), (24, [3, 11, 1, 30]),
                                                        (50, [8] * 6)])
def test_prefix_shared_equals_unshared_and_transformers(tiny_llama, engine, prefix_len,
                                                        suffix_lengths):
    hf, _, _ = tiny_llama
    prefix = prompts([prefix_len], seed=2)[0]
    suffixes = prompts(suffix_lengths, seed=3)
    handle = engine.add_prefix(prefix)
    readout = BooleanReadout()
    shared = engine.run([Request(tuple(s), readout, handle) for s in suffixes])
    unshared = engine.run([Request(tuple(prefix + s), readout) for s in suffixes])
    tokens = engine._booleans(readout)
    for s, a, b in zip(suffixes, shared, unshared):
        ref = tokens.margins(hf_last_logits(hf, prefix + s)[list(tokens.vocab)].unsqueeze(0))[0]
        assert a.margin == pytest.approx(float(ref), abs=1e-4)
        assert b.margin == pytest.approx(float(ref), abs=1e-4)
        assert a.value == b.value == (float(ref) > 0)
    engine.release(handle)


def test_nested_prefix_equals_flat_prompt(tiny_llama, engine):
    hf, _, _ = tiny_llama
    head, doc, question = prompts([6, 20, 5], seed=4)
    outer = engine.add_prefix(head)
    inner = engine.add_prefix(doc, parent=outer)
    assert inner.num_tokens == 26
    job = SeqJob(question, engine.arena.get(inner.id), vocab=tuple(range(256)))
    engine.runner.run([job])
    assert rel_err(job.logits[0], hf_last_logits(hf, head + doc + question)) <= RTOL


def test_extended_prefixes_equal_flat_prompts_and_leave_the_originals(tiny_llama, engine):
    """extend_prefixes: each resident document followed by a common stem (a join's carried
    anchors and its question's first tokens) reads as the flat prompt would."""
    hf, _, _ = tiny_llama
    docs = [prompts([n], seed=10 + n)[0] for n in (7, 19, 12)]
    stem, question = prompts([4, 5], seed=9)
    handles = [engine.add_prefix(d) for d in docs]
    extended = engine.extend_prefixes(handles, stem)
    assert [h.num_tokens for h in extended] == [len(d) + len(stem) for d in docs]
    for doc, handle, longer in zip(docs, handles, extended):
        for h, full in ((longer, doc + stem + question), (handle, doc + question)):
            job = SeqJob(question, engine.arena.get(h.id), vocab=tuple(range(256)))
            engine.runner.run([job])
            assert rel_err(job.logits[0], hf_last_logits(hf, full)) <= RTOL
        engine.release(handle)
        engine.release(longer)


def test_teacher_forced_label_positions_equal_transformers(tiny_llama, engine):
    hf, _, _ = tiny_llama
    prompt, cont = prompts([12, 4], seed=5)
    job = SeqJob(prompt + cont, read=tuple(range(-5, 0)))
    engine.runner.run([job])
    with torch.no_grad():
        ref = hf(torch.tensor([prompt + cont])).logits[0, -5:]
    assert rel_err(job.logits, ref) <= RTOL


def test_log_prob_reads_are_the_asked_columns_of_the_full_log_softmax(tiny_llama, engine):
    """A job read with `log_probs` gets back only its vocab's columns, normalized over the
    whole vocabulary (what label scoring needs, without a vocabulary of logits per position)."""
    hf, _, _ = tiny_llama
    prompt, cont = prompts([12, 4], seed=6)
    vocab = (3, 17, 40)
    job = SeqJob(prompt + cont, read=tuple(range(-5, 0)), vocab=vocab, log_probs=True)
    engine.runner.run([job])
    with torch.no_grad():
        ref = torch.log_softmax(hf(torch.tensor([prompt + cont])).logits[0, -5:].float(), -1)
    assert job.logits.shape == (5, 3)
    assert torch.allclose(job.logits, ref[:, list(vocab)], atol=1e-4)


def test_label_scores_in_groups_that_fit_the_arena_equal_one_group(tiny_llama, engine):
    """Label scoring keeps each prompt's KV for its spellings: with `kv_tokens` the prompts run
    in groups holding at most that many tokens at once, with the same scores."""
    from quail_engine.infer.labels import score_labels
    from quail_engine.infer.readout import LabelTokens

    labels = LabelTokens(("ab", "ac"), ((7,), (7,)), (((7, 8, 9), (7, 8)), ((7, 10), (7, 11))))
    seqs = [(None, p) for p in prompts([9, 14, 3, 20, 6], seed=8)]
    whole = score_labels(engine.runner, seqs, [labels] * len(seqs))
    stored, real_run = [], engine.runner.run

    def run(jobs, *a, **k):
        stored.append(sum(len(j.tokens) for j in jobs if j.store_kv))
        return real_run(jobs, *a, **k)

    engine.runner.run = run
    grouped = score_labels(engine.runner, seqs, [labels] * len(seqs), kv_tokens=24)
    assert max(stored) <= 24 and len([n for n in stored if n]) == 3
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(whole, grouped))
