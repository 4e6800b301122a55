"""SNOWFLAKE.CORTEX.COMPLETE's `response_format` option (its options object,
https://docs.snowflake.com/en/user-guide/snowflake-cortex/complete-structured-outputs) is
lowered as AI_COMPLETE's argument is: the op carries the JSON schema the engine decodes under,
so the answer parses as the format asks; a format with no JSON-schema reading is refused
while lowering, quoting it."""

import pytest

from quail_engine.sql import parse
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import FREE_TEXT

HISTORY = "[{'role': 'user', 'content': 'Review: ' || body}]"
SCHEMA = ("{'type': 'object', 'properties': {'sentiment': {'type': 'string', "
          "'enum': ['positive', 'negative']}}, 'required': ['sentiment']}")
FORMAT = f"{{'type': 'json', 'schema': {SCHEMA}}}"
EXPECTED = {"type": "object",
            "properties": {"sentiment": {"type": "string", "enum": ["positive", "negative"]}},
            "required": ["sentiment"], "additionalProperties": False}


def _op(call: str):
    (op,) = parse(f"SELECT {call} AS r FROM t", "snowflake").ai_ops
    return op


@pytest.mark.parametrize("call", [
    f"SNOWFLAKE.CORTEX.COMPLETE('m', {HISTORY}, {{'response_format': {FORMAT}}})",
    f"SNOWFLAKE.CORTEX.COMPLETE('m', {HISTORY}, {{'temperature': 0, 'max_tokens': 100, "
    f"'response_format': {FORMAT}}})",
    f"SNOWFLAKE.CORTEX.TRY_COMPLETE('m', {HISTORY}, {{'RESPONSE_FORMAT': {FORMAT}}})",
    # the options as JSON text: no object constant to quote, the value is read
    f"SNOWFLAKE.CORTEX.COMPLETE('m', {HISTORY}, PARSE_JSON('{{\"response_format\": "
    f"{{\"type\": \"json\", \"schema\": {SCHEMA.replace(chr(39), chr(34))}}}}}'))",
    # AI_COMPLETE's argument, the reading the option must match
    f"AI_COMPLETE('m', 'Review: ' || body, response_format => {FORMAT})",
])
def test_the_format_is_the_schema_the_answer_is_decoded_under(call):
    assert _op(call).schema == EXPECTED


def test_without_a_format_the_answer_stays_free_text():
    op = _op(f"SNOWFLAKE.CORTEX.COMPLETE('m', {HISTORY}, {{'max_tokens': 100}})")
    assert op.schema == FREE_TEXT


def test_a_format_without_a_schema_object_is_refused_quoting_it():
    with pytest.raises(ArgumentError) as caught:
        _op(f"SNOWFLAKE.CORTEX.COMPLETE('m', {HISTORY}, "
            "{'response_format': {'type': 'json', 'schema': 'sentiment please'}})")
    message = str(caught.value)
    assert message.startswith("SNOWFLAKE.CORTEX.COMPLETE: response_format needs")
    assert "'sentiment please'" in message
