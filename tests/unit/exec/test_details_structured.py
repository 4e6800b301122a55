"""Snowflake's show_details object of an answer under a response format: the answer object in
`structured_output` (`raw_message`, `type` json), not its text in `choices`
(https://docs.snowflake.com/en/user-guide/snowflake-cortex/complete-structured-outputs)."""

import json

from quail_engine.exec.tasks import details_object


def test_a_structured_answer_is_the_object_in_structured_output():
    obj = json.loads(details_object('{"sentiment": "positive"}', 7, "m", (3, 2), True))
    assert obj == {"created": 7, "model": "m",
                   "structured_output": [{"raw_message": {"sentiment": "positive"},
                                          "type": "json"}],
                   "usage": {"completion_tokens": 2, "prompt_tokens": 3, "total_tokens": 5}}


def test_free_text_stays_in_choices_and_no_answer_stays_null():
    obj = json.loads(details_object('{"a": 1}', 7, "m", None, False))
    assert obj["choices"] == [{"messages": '{"a": 1}'}] and "structured_output" not in obj
    assert details_object(None, 7, "m", None, True) is None
