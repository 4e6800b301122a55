"""Readouts: answer-token sets, and each readout kind against transformers' logits."""

from __future__ import annotations

import pytest
import torch
from conftest import WordTokenizer, hf_last_logits

from quail_engine.infer.api import BooleanReadout, LabelReadout, Request, ScoreReadout, sigmoid
from quail_engine.infer.readout import (
    answer_token_ids,
    boolean_tokens,
    label_tokens,
    word_variants,
)

TOK = WordTokenizer()
ENC = TOK.encode


@pytest.mark.parametrize("word, expected", [
    ("yes", ["yes", " yes", "Yes", " Yes", "YES", " YES"]),
    ("No", ["No", " No", "no", " no", "NO", " NO"]),
    ("N/A", ["N/A", " N/A", "n/a", " n/a", "N/a", " N/a"]),
])
def test_word_variants(word, expected):
    assert word_variants(word) == expected


def test_answer_tokens_cover_case_and_space_variants():
    ids = answer_token_ids(ENC, ["yes"])
    assert {TOK.inverse[i] for i in ids} == {"yes", " yes", "Yes", " Yes", "YES", " YES"}


def test_multi_token_words_fall_back_to_first_tokens():
    ids = answer_token_ids(ENC, ["good movie"])
    assert {TOK.inverse[i] for i in ids} == {"good", " good", "Good", " Good", "GOOD", " GOOD"}


def test_boolean_sets_drop_shared_tokens_and_reject_identical_words():
    bt = boolean_tokens(ENC, ["yes sir", "true"], ["yes madam", "no"])
    assert {TOK.inverse[i].strip().lower() for i in bt.true_ids} == {"true"}
    assert {TOK.inverse[i].strip().lower() for i in bt.false_ids} == {"no"}
    with pytest.raises(ValueError, match="share every first token"):
        boolean_tokens(ENC, ["yes"], ["yes"])


@pytest.mark.parametrize("labels, single_step", [
    (("positive", "negative"), True),
    (("positive", "negative", "neutral"), True),
    (("sports", "sports news"), False),         # first tokens collide
    (("pos", "positive"), True),                 # distinct tokens in this vocabulary
])
def test_label_single_step_iff_first_tokens_distinct(labels, single_step):
    assert label_tokens(ENC, labels).is_single_step is single_step


def _capitals_split(text: str) -> list[int]:
    """An encoder whose upper-case words begin with a piece of their first two letters (as
    Gemma's splits " INFECTIONS" and " INJURY" after " IN"); other words are one token each."""
    ids = []
    for k, word in enumerate(text.split(" ")):
        lead = " " if k or text.startswith(" ") else ""
        if not word:
            continue
        pieces = [word[:2], word[2:]] if word.isupper() and len(word) > 2 else [word]
        ids += [VOCAB.setdefault(lead + pieces[0], len(VOCAB))]
        ids += [VOCAB.setdefault(p, len(VOCAB)) for p in pieces[1:]]
    return ids


VOCAB: dict[str, int] = {}


def test_labels_drop_first_tokens_only_case_variants_share():
    lt = label_tokens(_capitals_split, ("infections", "injury", "cardiac"))
    shared = {VOCAB["IN"], VOCAB[" IN"]}
    assert lt.is_single_step  # teacher forcing of every label before the shared piece was dropped
    assert not shared & set(lt.vocab)
    assert {VOCAB[" infections"], VOCAB["Infections"]} <= set(lt.first_ids[0])
    assert lt.first_ids[2] == label_tokens(_capitals_split, ("cardiac", "renal")).first_ids[0]


def test_labels_whose_own_spellings_share_a_first_token_keep_every_token():
    lt = label_tokens(_capitals_split, ("IN vitro", "INJURY"))  # " IN" begins both as written
    assert not lt.is_single_step
    assert VOCAB[" IN"] in lt.first_ids[0] and VOCAB[" IN"] in lt.first_ids[1]


@pytest.mark.parametrize("labels", [("a",), ("x", "x")])
def test_label_list_must_be_two_distinct(labels):
    with pytest.raises(ValueError, match="at least two distinct"):
        label_tokens(ENC, labels)


def prompts(n, length=9, seed=7):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, 128, (length + i,), generator=g).tolist() for i in range(n)]


def hf_margin(hf, tokens, bt):
    logits = hf_last_logits(hf, tokens)
    return float(logits[list(bt.true_ids)].max() - logits[list(bt.false_ids)].max())


def test_boolean_and_score_follow_transformers_margin(tiny_llama, engine):
    hf, _, _ = tiny_llama
    bt = boolean_tokens(ENC, ("yes", "true"), ("no", "false"))
    ps = prompts(8)
    answers = engine.run([Request(tuple(p), BooleanReadout()) for p in ps])
    scores = engine.run([Request(tuple(p), ScoreReadout()) for p in ps])
    margins = [hf_margin(hf, p, bt) for p in ps]
    assert {a.value for a in answers} == {True, False}   # the prompts disagree
    for a, s, m in zip(answers, scores, margins):
        assert a.value is (m > 0)
        assert a.margin == pytest.approx(m, abs=1e-4)
        assert s.value == pytest.approx(sigmoid(m), abs=1e-4) and a.score == s.value


def test_calibration_subtracts_content_free_margin_once(tiny_llama, engine):
    hf, _, _ = tiny_llama
    bt = boolean_tokens(ENC, ("yes", "true"), ("no", "false"))
    cal = tuple(prompts(1, length=5, seed=9)[0])
    ps = prompts(6)
    readout = BooleanReadout(calibration_tokens=cal)
    fresh_before = engine.stats.fresh_tokens
    answers = engine.run([Request(tuple(p), readout) for p in ps])
    assert engine.stats.fresh_tokens - fresh_before == sum(map(len, ps)) + len(cal)
    ref = hf_margin(hf, list(cal), bt)
    for a, p in zip(answers, ps):
        m = hf_margin(hf, p, bt) - ref
        assert a.margin == pytest.approx(m, abs=1e-4) and a.value is (m > 0)
    fresh_before = engine.stats.fresh_tokens
    engine.run([Request(tuple(ps[0]), readout)])
    assert engine.stats.fresh_tokens - fresh_before == len(ps[0])   # reference cached


def hf_label_logprob(hf, prompt, label_ids):
    with torch.no_grad():
        logp = torch.log_softmax(hf(torch.tensor([prompt + label_ids])).logits[0].float(), -1)
    n = len(prompt)
    return sum(float(logp[n - 1 + j, t]) for j, t in enumerate(label_ids))


@pytest.mark.parametrize("labels", [("positive", "negative", "neutral"), ("good", "bad")])
def test_single_step_labels_pick_best_first_token(tiny_llama, engine, labels):
    hf, _, _ = tiny_llama
    lt = label_tokens(ENC, labels)
    ps = prompts(6, seed=11)
    answers = engine.run([Request(tuple(p), LabelReadout(labels)) for p in ps])
    for a, p in zip(answers, ps):
        logits = hf_last_logits(hf, p)
        best = max(range(len(labels)), key=lambda i: float(logits[list(lt.first_ids[i])].max()))
        assert a.value == labels[best]
        assert 0 < a.score <= 1


@pytest.mark.parametrize("labels", [("sports", "sports news"), ("sports news", "sports", "bad")])
def test_colliding_labels_scored_by_teacher_forcing(tiny_llama, engine, labels):
    hf, _, _ = tiny_llama
    ps = prompts(6, seed=13)
    answers = engine.run([Request(tuple(p), LabelReadout(labels)) for p in ps])
    for a, p in zip(answers, ps):
        scores = [torch.logsumexp(torch.tensor([hf_label_logprob(hf, p, ENC(s))
                                                for s in (lab, " " + lab)]), 0)
                  for lab in labels]
        assert a.value == labels[int(torch.stack(scores).argmax())]
        probs = torch.softmax(torch.stack(scores), 0)
        assert a.score == pytest.approx(float(probs.max()), abs=1e-4)


def test_colliding_labels_with_prefix_equal_unshared(engine):
    head, tail = prompts(2, length=10, seed=17)
    handle = engine.add_prefix(head)
    ro = LabelReadout(("sports", "sports news"), calibration_tokens=tuple(tail[:3]))
    shared = engine.run([Request(tuple(tail), ro, handle)])[0]
    flat = engine.run([Request(tuple(head + tail), ro)])[0]
    assert shared.value == flat.value and shared.score == pytest.approx(flat.score, abs=1e-5)
