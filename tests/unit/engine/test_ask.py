"""The high-level helpers: shared-prefix variants give the same answers as flat prompts."""

from __future__ import annotations

import pytest

from quail_engine.infer.api import BooleanReadout, Request
from quail_testing import ask

DOCS = ["the movie was great", "the film was awful", "a bad movie", "good"]
QUESTIONS = ["is it good", "is the movie bad", "was it a film"]


def test_prompt_layout_is_document_first(engine):
    head, tail = ask.prompt_split(engine, "the movie", "is it good")
    text = engine.codec.decode(head + tail)
    assert text.index("movie") < text.index("good")
    assert engine.chat_split("x", "y")[1][-1] == engine.codec.encode("\nAnswer:")[-1]


@pytest.mark.parametrize("calibrate", [False, True])
def test_ask_questions_shares_documents_without_changing_answers(engine, calibrate):
    shared = ask.ask_questions(engine, DOCS, QUESTIONS, calibrate=calibrate)
    for qi, q in enumerate(QUESTIONS):
        flat = ask.ask_boolean(engine, DOCS, q, calibrate=calibrate)
        for di in range(len(DOCS)):
            assert shared[di][qi].value == flat[di].value
            assert shared[di][qi].margin == pytest.approx(flat[di].margin, abs=1e-4)
    assert engine.arena.num_entries == 0


def test_ask_join_equals_flat_prompts_and_computes_each_anchor_once(engine):
    anchors, partners = DOCS[:2], DOCS[1:]
    before = engine.stats.fresh_tokens
    grid = ask.ask_join(engine, anchors, partners, "do they agree", calibrate=False)
    heads = [ask.join_split(engine, a, "", "do they agree")[0] for a in anchors]
    tails = [ask.join_split(engine, "", p, "do they agree")[1] for p in partners]
    assert engine.stats.fresh_tokens - before == (sum(map(len, heads))
                                                  + len(anchors) * sum(map(len, tails)))
    flat = engine.run([Request(tuple(h + t), BooleanReadout()) for h in heads for t in tails])
    for k, a in enumerate(a for row in grid for a in row):
        assert a.value == flat[k].value and a.margin == pytest.approx(flat[k].margin, abs=1e-4)
    assert engine.arena.num_entries == 0 and engine.arena.bytes_in_use == 0


def test_classify_and_score_return_user_values(engine):
    labels = ("positive", "negative", "neutral")
    out = ask.classify(engine, DOCS, labels)
    assert all(a.value in labels and 0 < a.score <= 1 for a in out)
    scores = ask.ask_score(engine, DOCS, "is it good")
    booleans = ask.ask_boolean(engine, DOCS, "is it good")
    for s, b in zip(scores, booleans):
        assert 0 <= s.value <= 1 and (s.value > 0.5) == b.value


def test_generate_respects_max_tokens(engine):
    texts = ask.generate(engine, ["the movie"], max_tokens=3)
    assert len(engine.codec.encode(texts[0])) <= 3
