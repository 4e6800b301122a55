"""SNOWFLAKE.CORTEX.COMPLETE with a conversation history: one prompt, the earlier turns as
`role: content` lines, then the last (user) message's content; contents may read columns.
AI_SENTIMENT with more aspect categories than Snowflake takes is refused, saying the limit."""

import pytest

from quail_engine.sql import parse
from quail_engine.sql.errors import ArgumentError, LabelsNotLiteralError
from quail_engine.sql.prompt import render_prompt


def _op(call: str):
    (op,) = parse(f"SELECT {call} FROM t", "snowflake").ai_ops
    return op


def test_history_becomes_one_prompt_with_the_earlier_turns_as_lines():
    op = _op("SNOWFLAKE.CORTEX.COMPLETE('llama3.1-8b', [{'role': 'system', 'content': 'Be brief.'},"
             " {'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello'},"
             " {'role': 'user', 'content': 'Summarize: ' || body}], {'max_tokens': 50})")
    assert op.op == "ai_generate" and op.options.model == "llama3.1-8b"
    assert op.template == "system: Be brief.\nuser: Hi\nassistant: Hello\nSummarize: {0}"
    assert [b.sql for b in op.bindings] == ["body"]
    assert op.options.gen.max_tokens == 50 and op.options.on_error == "fail"


def test_contents_bind_columns_of_every_turn():
    op = _op("SNOWFLAKE.CORTEX.TRY_COMPLETE('m', [{'role': 'system', 'content': PROMPT('You "
             "answer about {0}.', topic)}, {'role': 'user', 'content': PROMPT('Is {0} true?', "
             "claim)}])")
    assert op.template == "system: You answer about {0}.\nIs {1} true?"
    assert render_prompt(op, ["tea", "tea is hot"]) == ("system: You answer about tea.\n"
                                                        "Is tea is hot true?")
    assert op.options.on_error == "null"


REFUSED = [
    ("SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': 'user', 'content': 'x'}, {'role': 'assistant', "
     "'content': 'y'}])", ArgumentError, "must end with a user message"),
    ("SNOWFLAKE.CORTEX.COMPLETE('m', [])", ArgumentError, "must end with a user message"),
    ("SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': 'bot', 'content': 'x'}])", ArgumentError,
     "role must be one of system, user, assistant, got 'bot'"),
    ("SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': 'user', 'text': 'x'}])", ArgumentError,
     "must be {'role': ..., 'content': ...}"),
    ("SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': r, 'content': 'x'}])", LabelsNotLiteralError,
     "the role must be a literal"),
    ("AI_SENTIMENT(review, ['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'a8', 'a9', 'a10'])", ArgumentError, "at most 10 names"),
]


@pytest.mark.parametrize(("call", "error", "words"), REFUSED)
def test_refused_naming_the_function(call, error, words):
    with pytest.raises(error) as info:
        parse(f"SELECT {call} FROM t", "snowflake")
    message = str(info.value)
    assert message.startswith(call.split("(")[0]) and words in message, message
    assert "[snowflake] in: " in message
