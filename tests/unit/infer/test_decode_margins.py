"""A generated answer's step margins (what the re-ask band reads, infer/reask.py) on the
embedded writer (real weights, CPU, float32): the smallest top-two logit gap over its steps, the
same whether the steps ran one by one in the decode loop or teacher-forced in one pass; a grammar
answer's counts only the tokens its grammar allows."""

from __future__ import annotations

import json

import pytest
from test_grammar_decode import OBJECT, TEXTS

from quail_engine.infer.api import Grammar

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def engine(require_embedded):
    require_embedded("smollm2-135m")
    import torch

    from quail_engine.infer.engine import LocalEngine

    return LocalEngine.load("smollm2-135m", dtype=torch.float32, prefix_sharing=False)


def _prompt(engine, text):
    head, tail = engine.chat_split(f"Summarize in a few words: {text}", "")
    return head + tail


def test_a_generated_answers_margin_is_its_smallest_step_gap(engine):
    import torch

    from quail_engine.infer.decode import DecodeSeq, greedy_decode
    from quail_engine.infer.runner import SeqJob

    seqs = [DecodeSeq(_prompt(engine, t), max_tokens=10, track_margin=True) for t in TEXTS]
    greedy_decode(engine.runner, seqs, engine.codec.eos_ids, engine.codec.decode)
    for s in seqs:
        steps = len(s.out_tokens) + (s.finish == "eos")  # (the EOS step was a choice too)
        tokens = list(s.tokens) + s.out_tokens
        job = SeqJob(tokens=tokens[:len(s.tokens) + steps - 1],
                     read=tuple(range(len(s.tokens) - 1, len(s.tokens) + steps - 1)))
        with torch.inference_mode():
            engine.runner.run([job])
        top = job.logits.float().topk(2, dim=-1).values
        assert s.margin == pytest.approx(float((top[:, 0] - top[:, 1]).min()), abs=1e-3)
    untracked = DecodeSeq(_prompt(engine, TEXTS[0]), max_tokens=4)
    greedy_decode(engine.runner, [untracked], engine.codec.eos_ids, engine.codec.decode)
    assert untracked.margin == float("inf")


def test_a_grammar_answers_margin_counts_only_allowed_tokens(engine):
    from quail_engine.infer.decode import DecodeSeq, greedy_decode

    head, tail = engine.chat_split(f"{TEXTS[0]}\n\nExtract a JSON object with keys name and "
                                   "city.", "")
    seq = DecodeSeq(head + tail, max_tokens=40, grammar=Grammar(json.dumps(OBJECT)),
                    track_margin=True)
    greedy_decode(engine.runner, [seq], engine.codec.eos_ids, engine.codec.decode,
                  engine._grammar_masks())
    assert json.loads(seq.text).keys() == {"name", "city"}
    # forced tokens ('{"name": ' has one allowed spelling at a time) have no rival: their
    # margin is infinite, and the answer's is set by the steps where the model chose
    assert 0 < seq.margin < float("inf")


def test_generated_text_under_bf16_band_is_float32s(require_embedded):
    """The committed decode band (bench/results/decode-band-cpu.md) re-asked every answer on the
    bench, so under bf16-band generated text is written in float32 at once: the texts equal
    float32's, where plain bf16's differ on about half the bench's prompts."""
    require_embedded("smollm2-135m")
    import torch

    from quail_engine.infer.api import GenerateReadout, Request
    from quail_engine.infer.engine import LocalEngine
    from quail_engine.infer.factory import load_engine

    banded = load_engine("smollm2-135m", "cpu", "bf16-band")
    assert banded.band.decode is not None and banded.band.decode_direct
    reference = LocalEngine.load("smollm2-135m", dtype=torch.float32)
    requests = [Request(tuple(_prompt(reference, t)), GenerateReadout(max_tokens=12))
                for t in TEXTS]
    decoded0 = banded.stats.decode_tokens
    got = [a.value for a in banded.run(requests)]
    assert got == [a.value for a in reference.run(requests)]
    assert banded.stats.decode_tokens == decoded0  # (the bf16 engine wrote nothing)
    assert banded.reasked == len(requests)
