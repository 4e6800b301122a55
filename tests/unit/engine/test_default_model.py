"""The real default model through the engine API: exactness against transformers on the same
converted weights, greedy decode token for token, and answer accuracy on the labelled reviews."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from quail_engine.infer.api import BooleanReadout, LabelReadout, Request
from quail_engine.infer.decode import DecodeSeq, greedy_decode
from quail_engine.infer.runner import SeqJob
from quail_testing import ask

pytestmark = pytest.mark.model
DATA = Path(__file__).resolve().parents[2] / "data" / "reviews_labelled.jsonl"
REVIEWS = [r for r in map(json.loads, DATA.read_text().splitlines()) if r["kind"] == "review"]


@pytest.fixture(scope="module")
def real():
    from transformers import AutoModelForCausalLM

    from quail_engine.infer.engine import LocalEngine
    from quail_engine.infer.loader import resolve_model_dir

    engine = LocalEngine.load("default", "cpu", "float32", token_budget=512)
    hf = AutoModelForCausalLM.from_pretrained(str(resolve_model_dir("default")),
                                              dtype=torch.float32).eval()
    return engine, hf


def hf_logits(hf, tokens):
    with torch.no_grad():
        return hf(torch.tensor([list(tokens)])).logits[0, -1].float()


def test_packed_and_prefix_shared_logits_equal_transformers(real):
    engine, hf = real
    docs = [r["text"] for r in REVIEWS[:5]]
    splits = [ask.prompt_split(engine, d, "Is this review positive?") for d in docs]
    vocab = engine._booleans(BooleanReadout()).vocab
    jobs = [SeqJob(h + t, vocab=vocab) for h, t in splits]
    engine.runner.run(jobs)
    handle = engine.add_prefix(splits[0][0])
    tails = [ask.prompt_split(engine, docs[0], q)[1] for q in ("Is it positive?", "Is it long?")]
    shared = [SeqJob(t, engine.arena.get(handle.id), vocab=vocab) for t in tails]
    engine.runner.run(shared)
    engine.release(handle)
    cases = [(j, list(j.tokens)) for j in jobs] + [(j, splits[0][0] + t)
                                                  for j, t in zip(shared, tails)]
    for job, full in cases:
        ref = hf_logits(hf, full)[list(vocab)]
        assert float((job.logits[0] - ref).abs().max() / ref.abs().max()) <= 1e-4


def test_greedy_decode_equals_transformers_generate(real):
    engine, hf = real
    prompts = [sum(engine.chat_split(p, ""), []) for p in
               ("The capital of France is", "List three colours:", "Once upon a time")]
    seqs = [DecodeSeq(p, max_tokens=12) for p in prompts]
    greedy_decode(engine.runner, seqs, engine.codec.eos_ids, engine.codec.decode)
    for s, p in zip(seqs, prompts):
        with torch.no_grad():
            out = hf.generate(torch.tensor([p]), max_new_tokens=12, do_sample=False,
                              eos_token_id=sorted(engine.codec.eos_ids))
        new = out[0, len(p):].tolist()
        new = [t for t in new if t not in engine.codec.eos_ids]
        assert s.out_tokens == new


@pytest.mark.parametrize("task", ["filter", "classify"])
def test_accuracy_on_labelled_reviews(real, task):
    engine, _ = real
    texts = [r["text"] for r in REVIEWS]
    if task == "filter":
        answers = ask.ask_boolean(engine, texts, "Is this review positive?")
        right = [a.value == (r["sentiment"] == "positive") for a, r in zip(answers, REVIEWS)]
    else:
        answers = ask.classify(engine, texts, ("positive", "negative"),
                               "Classify the sentiment of the review.")
        right = [a.value == r["sentiment"] for a, r in zip(answers, REVIEWS)]
    assert sum(right) / len(right) >= 0.85


def test_label_readout_with_colliding_labels_runs_on_the_real_tokenizer(real):
    engine, _ = real
    labels = ("sports", "sports news", "politics")
    lt = engine._labels(LabelReadout(labels))
    assert not lt.is_single_step
    head, tail = ask.prompt_split(engine, "The team won the cup final.", "Topic?",
                                  ask.label_hint(labels))
    answer = engine.run([Request(tuple(head + tail), LabelReadout(labels))])[0]
    assert answer.value in labels and 0 < answer.score <= 1
