"""AI_COUNT_TOKENS's special forms count every text the named function reads (the template the
executor tokenizes holds them all), read back through Snowflake's emitter, and an unknown
function name is refused naming the documented spelling
(https://docs.snowflake.com/en/sql-reference/functions/ai_count_tokens)."""

import pytest

from quail_engine.sql import parse, transpile
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.prompt import render_prompt


def _op(call: str):
    (op,) = parse(f"SELECT {call} FROM t", "snowflake").ai_ops
    return op


COUNTED = [
    # (call, row values, the text counted)
    ("AI_COUNT_TOKENS('ai_translate', review, 'en', 'de')", ["Gut", "en", "de"], "Gut\nen\nde"),
    ("AI_COUNT_TOKENS('ai_similarity', a, b)", ["red shoes", "blue boots"],
     "red shoes\nblue boots"),
    ("AI_COUNT_TOKENS('ai_classify', review, ['price', 'quality'])", ["Too dear"],
     'Too dear\n["price", "quality"]'),
    ("AI_COUNT_TOKENS('ai_classify', review, ['a', 'b'], {'task_description': 'Pick one'})",
     ["x"], 'x\n["a", "b"]\n{"task_description": "Pick one"}'),
    ("AI_COUNT_TOKENS('ai_complete', 'llama3.1-8b', PROMPT('Is {0} ok?', review))", ["it"],
     "Is it ok?"),
]


@pytest.mark.parametrize(("call", "values", "text"), COUNTED)
def test_special_form_counts_every_text_argument(call, values, text):
    assert render_prompt(_op(call), values) == text


@pytest.mark.parametrize("call", [c for c, _, _ in COUNTED])
def test_special_form_reads_back_in_snowflake(call):
    sql = f"SELECT {call} FROM t"
    again = transpile(sql, "snowflake", "snowflake", keep_source=False)
    assert parse(again, "snowflake").ai_ops == parse(sql, "snowflake").ai_ops, again


def test_similarity_model_comes_from_the_options():
    op = _op("AI_COUNT_TOKENS('ai_similarity', a, b, {'model': 'e5-base-v2'})")
    assert op.options.model == "e5-base-v2"
    assert dict(op.task_args) == {"function": "ai_similarity"}


REFUSED = [
    ("AI_COUNT_TOKENS('ai_frob', review)", "unknown function name 'ai_frob'; expected one of "
     "ai_complete"),
    ("AI_COUNT_TOKENS('complete', 'llama3.1-8b', review)", "names begin with 'ai_': 'ai_complete'"),
    ("AI_COUNT_TOKENS('AI_SENTIMENT', review)", "lower case: 'ai_sentiment'"),
    ("AI_COUNT_TOKENS('ai_translate', review, 'en')", "takes input, source, target"),
    ("AI_COUNT_TOKENS('ai_complete', review)", "takes model, input [, options]"),
    ("AI_COUNT_TOKENS('ai_sentiment', 'llama3.1-8b', review)", "takes input [, options]"),
    ("AI_COUNT_TOKENS('ai_classify', review, ['only'])", "at least 2 labels"),
]


@pytest.mark.parametrize(("call", "words"), REFUSED)
def test_refused_with_the_function_named_and_the_sql_quoted(call, words):
    with pytest.raises(ArgumentError) as info:
        parse(f"SELECT {call} FROM t", "snowflake")
    message = str(info.value)
    assert message.startswith("AI_COUNT_TOKENS") and words in message, message
    assert "[snowflake] in: " in message
