"""Two-argument layouts from SQL: which argument is the shared document, which the partner read as
the answer, and the warning for shapes the default model answers poorly."""

from __future__ import annotations

import logging

import pytest

from quail_engine.exec import prompts
from quail_engine.exec.prompts import OpPrompt, warn_if_weak
from quail_engine.infer.api import BooleanReadout, SpanReadout
from quail_engine.sql import parse

CASES = [
    # (dialect, sql, values) -> (prefix, suffix)
    ("duckdb", "SELECT * FROM r WHERE ai_filter('Does {0} mention {1}?', review, 'battery life')",
     ("Dies in an hour.", "battery life"),
     ("Text:\nDies in an hour.\n\n",
      "Question: Does (see the text above) mention\nAnswer: battery life")),
    ("snowflake", "SELECT * FROM t WHERE AI_FILTER(PROMPT('Review: {0}\nDoes it mention {1}?', "
     "review, topic))", ("Dies in an hour.", "battery life"),
     ("Text:\nDies in an hour.\n\n",
      "Question: Review: (see the text above)\nDoes it mention\nAnswer: battery life")),
    # a join's document is its first argument's relation, whatever the plan anchors on
    ("snowflake", "SELECT * FROM r JOIN p ON AI_FILTER(PROMPT('Is this review: {0} about this "
     "product: {1}?', r.review, p.name))", ("Dies in an hour.", "Headphones"),
     ("Text:\nDies in an hour.\n\n", "Question: Is this review: (see the text above) about "
      "this product:\nAnswer: Headphones")),
    # every slot before the question: one document, asked yes/no as before
    ("snowflake", "SELECT * FROM t WHERE AI_FILTER(PROMPT('Title: {0} Body: {1} Is it spam?', "
     "title, body))", ("Win", "Click here"),
     ("Text:\nWin\n\nClick here\n\n",
      "Question: Title: (see the text above) Body: (see the text above) Is it spam?\n"
      "Answer yes or no.")),
    ("snowflake", "SELECT * FROM t WHERE AI_FILTER(PROMPT('Is this review positive? {0}', "
     "review))", ("Great.",),
     ("Text:\nGreat.\n\n", "Question: Is this review positive? (see the text above)\n"
      "Answer yes or no.")),
]


@pytest.mark.parametrize("dialect, sql, values, expected", CASES)
def test_pair_layout(dialect, sql, values, expected):
    op, = parse(sql, dialect).ai_ops
    layout = OpPrompt.for_op(op)
    assert layout.texts(values) == expected
    readout = layout.readout((1, 2, 3))
    if layout.partner_slots:
        # the partner is the span after the readout's cue; the document stays the prefix
        assert isinstance(readout, SpanReadout) and expected[1].startswith(readout.cue + " ")
        assert readout.calibration_prefix == "Text:\nN/A\n\n"
    else:
        assert readout == BooleanReadout(calibration_tokens=(1, 2, 3))


def test_weak_shapes_warn_once_on_the_default_model(caplog):
    prompts._warn_once.cache_clear()
    ops = parse("SELECT AI_FILTER(PROMPT('Is it negative? {0}', a)), "
                "AI_FILTER(PROMPT('Is it long? {0}', a)), "
                "AI_FILTER(PROMPT('Does {0} mention {1}?', a, 'price')), "
                "AI_COMPLETE('m', PROMPT('Reply to {0}', a)) FROM t", "snowflake").ai_ops
    with caplog.at_level(logging.WARNING, logger="quail_engine.exec.prompts"):
        for op in ops + ops:  # the embedded writer: only its generation, once
            warn_if_weak(op, "smollm2-135m")
        for op in ops + ops:
            warn_if_weak(op, "default")
        for op in ops:
            warn_if_weak(op, "my-org/qwen3-4b")
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "generation on the embedded writer", "yes/no filter on one document", "generation"]


def test_a_question_that_goes_on_after_its_partner_warns_on_the_default_model(caplog):
    """The pair layout scores the partner as the question's last words: a template that goes on
    after it ('{0} cited by {1}', 'does {1} refute {0}') loses those words on the default
    model, so the user is told once; ending with the partner is fine."""
    prompts._warn_once.cache_clear()
    join = parse("SELECT * FROM p JOIN x ON AI_FILTER(PROMPT("
                 "'Is the passage {0} cited by the legal excerpt {1} in this case?', p.text, "
                 "x.text))", "snowflake").ai_ops[0]
    ending = parse("SELECT * FROM p JOIN x ON AI_FILTER(PROMPT("
                   "'Does the excerpt {0} cite the passage {1}?', x.text, p.text))",
                   "snowflake").ai_ops[0]
    with caplog.at_level(logging.WARNING, logger="quail_engine.exec.prompts"):
        warn_if_weak(ending, "default", OpPrompt.for_op(ending))
        assert caplog.records == []
        warn_if_weak(join, "default", OpPrompt.for_op(join))  # partner = the excerpt
        warn_if_weak(join, "default", OpPrompt.for_op(join))
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "two-argument question that goes on after its second argument"]


def test_a_join_renders_each_anchor_once_and_its_rows_share_the_string():
    """The executor's text memo: one string object per document across its partners (sorting
    and hashing a join's rows then compare anchors by identity), one per question."""
    from quail_engine.exec.call_prep import TextMemo

    op, = parse("SELECT * FROM r JOIN p ON AI_FILTER(PROMPT('Is this review: {0} about this "
                "product: {1}?', r.review, p.name))", "snowflake").ai_ops
    memo = TextMemo(OpPrompt.for_op(op))
    rows = [memo((review, name)) for review in ("Dies fast.", "Loud.")
            for name in ("Headphones", "Speaker", "Headphones")]
    assert [p for p, _ in rows] == ["Text:\nDies fast.\n\n"] * 3 + ["Text:\nLoud.\n\n"] * 3
    assert all(p is rows[0][0] for p, _ in rows[:3]) and all(p is rows[3][0] for p, _ in rows[3:])
    assert rows[0][1] is rows[2][1] is rows[3][1] is rows[5][1]
    assert rows[1][1].endswith("Speaker")
