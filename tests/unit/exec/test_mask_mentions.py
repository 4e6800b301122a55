"""ai_mask: the model copies each kind's mention (an extraction under a schema); the answer is
the row's text with those mentions replaced, never text the model rewrote (the embedded writer
asked to rewrite 'Alice Smith emailed alice@example.com about the refund.' wrote 'MASKED.')."""

from __future__ import annotations

import json

import pytest

from quail_engine.exec.tasks import masked, task_prompt
from quail_engine.sql import parse
from quail_engine.sql.response_schema import json_schema

TEXT = "Alice Smith emailed alice@example.com about the refund; alice smith waits."


def _op(sql: str, dialect: str = "databricks"):
    return parse(sql, dialect).ai_ops[0]


MASK = _op("SELECT ai_mask(body, array('person', 'email')) FROM t")


@pytest.mark.parametrize(("mentions", "expected"), [
    ({"person": "Alice Smith", "email": "alice@example.com"},
     "[MASKED] emailed [MASKED] about the refund; [MASKED] waits."),
    ({"person": "Bob Jones", "email": None},  # a mention the text does not hold
     TEXT),
    ({"person": "a", "email": None},  # one letter: never a mention worth masking text for
     TEXT),
    ({"person": "Smith", "email": None},  # whole words only
     "Alice [MASKED] emailed alice@example.com about the refund; alice [MASKED] waits."),
    ({"person": "Al", "email": None},
     TEXT),
])
def test_mentions_are_masked_in_the_text_as_written(mentions, expected):
    assert masked(MASK, (TEXT,), json.dumps(mentions)) == expected


def test_an_unfinished_answer_is_null_not_the_unmasked_text():
    assert masked(MASK, (TEXT,), None) is None


def test_the_model_is_asked_for_each_kinds_mention_under_a_schema():
    schema = json_schema(MASK)
    assert schema["properties"] == {"person": {"type": ["string", "null"]},
                                    "email": {"type": ["string", "null"]}}
    prompt = task_prompt(MASK, TEXT)
    assert prompt.startswith(TEXT) and '"person": Which person is named?' in prompt


def test_a_mask_of_several_slots_masks_the_text_the_prompt_renders():
    op = _op("SELECT ai_mask(concat(title, ': ', body), array('person')) FROM t")
    assert masked(op, ("Note", "Bob called"), json.dumps({"person": "Bob"})) == \
        "Note: [MASKED] called"
