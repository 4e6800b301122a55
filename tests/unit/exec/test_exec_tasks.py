"""Generative task prompts and answer shaping, per operator kind."""

import json

import pytest

from quail_engine.errors import UnsupportedError
from quail_engine.exec.prompts import OpPrompt
from quail_engine.exec.sql_values import SIMILARITY_CENTRE, SIMILARITY_SPREAD, sql_value
from quail_engine.exec.tasks import check_supported
from quail_engine.infer.api import Answer, GenerateReadout, ScoreReadout, SpanReadout
from quail_engine.sql.ir import AiOp, Binding, Label

B0 = (Binding(0, "t.x", "t", "x"),)


@pytest.mark.parametrize("op,contains", [
    (AiOp("ai_generate", "{0}", B0, task="summarize", task_args=(("max_words", "10"),)),
     "Summarize the following text in at most 10 words:\n\nDOC"),
    (AiOp("ai_generate", "{0}", B0, task="translate", task_args=(("target_language", "fr"),)),
     "to fr"),
    (AiOp("ai_generate", "{0}", B0, task="mask", labels=(Label("person"),)),
     "\"person\": Which person is named?"),
    (AiOp("ai_extract", "{0}", B0, labels=(Label("mood", "What mood?"),), output_type="JSON"),
     '"mood": What mood?'),
    (AiOp("ai_aggregate", "{0}", B0, instruction="Name the common theme"), "Name the common theme"),
    (AiOp("ai_generate", "Write a haiku about {0}", B0), "Write a haiku about DOC"),
])
def test_task_prompts(op, contains):
    prefix, suffix = OpPrompt.for_op(op).texts(("DOC",))
    assert contains in prefix and suffix == ""
    assert isinstance(OpPrompt.for_op(op).readout(), GenerateReadout)


@pytest.mark.parametrize("op,question", [
    (AiOp("ai_classify", "{0}", B0, labels=(Label("positive"), Label("negative")),
          task="sentiment"), "Question: What is the sentiment of the text above?\n"
                             "Answer with one word: positive or negative."),
    (AiOp("ai_filter", "Is {0} about cats?", B0, output_type="BOOLEAN"),
     "Question: Is (see the text above) about cats?\nAnswer yes or no."),
])
def test_document_first_layout(op, question):
    prefix, suffix = OpPrompt.for_op(op).texts(("DOC",))
    assert prefix == "Text:\nDOC\n\n" and suffix == question


EXTRACT = AiOp("ai_extract", "{0}", B0, labels=(Label("mood"),), output_type="JSON")


def test_extraction_decodes_under_its_fields_schema():
    grammar = OpPrompt.for_op(EXTRACT).readout().grammar
    assert json.loads(grammar.source) == {
        "type": "object", "properties": {"mood": {"type": ["string", "null"]}},
        "required": ["mood"], "additionalProperties": False}


@pytest.mark.parametrize("answer,value", [
    (Answer('{"mood": "happy"}'), {"mood": "happy"}),
    (Answer('{"mood": null}'), {"mood": None}),
])
def test_extract_answers_become_json(answer, value):
    assert json.loads(sql_value(EXTRACT, answer)) == value


def test_an_answer_the_grammar_did_not_complete_is_null():
    """The engine gives None where the model ran out of tokens inside the schema."""
    assert sql_value(EXTRACT, Answer(None)) is None


@pytest.mark.parametrize("output_type,text,value", [
    ("BIGINT", "42", 42), ("BIGINT", "-7", -7), ("DOUBLE", "2.5", 2.5), ("DOUBLE", "3", 3.0),
])
def test_typed_generation_decodes_a_number(output_type, text, value):
    op = AiOp("ai_generate", "{0}", B0, output_type=output_type)
    readout = OpPrompt.for_op(op).readout()
    assert json.loads(readout.grammar.source)["type"] == (
        "integer" if output_type == "BIGINT" else "number")
    assert OpPrompt.for_op(op).texts(("How many?",))[0].endswith("number only.")
    result = sql_value(op, Answer(text))
    assert result == value and type(result) is type(value)


def test_free_text_generation_has_no_grammar():
    op = AiOp("ai_generate", "Write a haiku about {0}", B0)
    assert OpPrompt.for_op(op).readout().grammar is None
    assert sql_value(op, Answer("  a haiku \n")) == "a haiku"


def test_similarity_reads_the_second_text_after_the_first_in_the_vendor_range():
    """The second text is the span a span readout scores after the first (a multi-line first
    text stays whole); the PMI's margin over the centre is the middle of the range at 0 and
    rises towards its top."""
    op = AiOp("ai_similarity", "{0}\n{1}", B0 + (Binding(1, "'x'"),),
              task_args=(("range", "-1..1"),), output_type="DOUBLE")
    layout = OpPrompt.for_op(op)
    readout = layout.readout()
    assert isinstance(readout, SpanReadout) and readout.threshold == SIMILARITY_CENTRE
    prefix, suffix = layout.texts(("line one\nline two", "other text"))
    assert prefix.startswith("Text:\nline one\nline two\n\n") and suffix == ""
    assert prefix.endswith(f"{readout.cue} other text")
    assert sql_value(op, Answer(False, 0.5, 0.0)) == 0.0
    assert 0.9 < sql_value(op, Answer(True, 1.0, 3 * SIMILARITY_SPREAD)) < 1.0
    assert -1.0 < sql_value(op, Answer(False, 0.0, -3 * SIMILARITY_SPREAD)) < -0.9
    same = AiOp("ai_similarity", "{0}\n{0}", B0, output_type="DOUBLE")
    assert OpPrompt.for_op(same).texts(("a",))[0].endswith(f"{readout.cue} a")


def test_multi_label_classify_is_asked_one_decision_per_label():
    op = AiOp("ai_classify", "{0}", B0, labels=(Label("a"), Label("b")), multi=True)
    layout = OpPrompt.for_op(op)
    assert layout.is_multi_label and not layout.decisions().is_multi_label
    assert sql_value(op, Answer(True)) is True  # one label's decision (OpRunner gathers them)


def test_embeddings_are_refused_clearly():
    with pytest.raises(UnsupportedError, match="embedding"):
        check_supported(AiOp("ai_embed", "{0}", B0))


def test_cortex_sentiment_asks_for_positivity_and_answers_in_minus_one_to_one():
    """SNOWFLAKE.CORTEX.SENTIMENT returns -1..1; it asked 'What is the sentiment?' answered yes
    or no (0.5 for positive and negative texts alike) and returned P(yes) in 0..1."""
    from quail_engine.sql import parse

    op = parse("SELECT SNOWFLAKE.CORTEX.SENTIMENT(review) FROM t", "snowflake").ai_ops[0]
    _, question = OpPrompt.for_op(op).texts(("DOC",))
    assert question.startswith("Question: Is the sentiment of the text above positive?")
    assert isinstance(OpPrompt.for_op(op).readout(), ScoreReadout)
    assert sql_value(op, Answer(0.9)) == pytest.approx(0.8)
    assert sql_value(op, Answer(0.1)) == pytest.approx(-0.8)


def test_a_summary_keeps_its_word_limit():
    op = AiOp("ai_generate", "{0}", B0, task="summarize", task_args=(("max_words", "5"),))
    assert sql_value(op, Answer("The lamp broke after two days of light use.")) == \
        "The lamp broke after two"
    free = AiOp("ai_generate", "{0}", B0, task="summarize", task_args=(("max_words", "0"),))
    assert sql_value(free, Answer(" a  b c ")) == "a  b c"
