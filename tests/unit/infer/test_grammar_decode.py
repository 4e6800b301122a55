"""Constrained decoding on the embedded writer (real weights, CPU): a grammar's answer always
parses as its schema, in a batch beside free-text answers, and one the model cannot finish
within its tokens is None, never a half-written value."""

from __future__ import annotations

import json

import pytest

from quail_engine.infer.api import GenerateReadout, Grammar, Request

pytestmark = pytest.mark.model

OBJECT = {"type": "object", "additionalProperties": False, "required": ["name", "city"],
          "properties": {"name": {"type": ["string", "null"]},
                         "city": {"type": ["string", "null"]}}}
TEXTS = ["Order 1234 shipped to Alice Smith in Paris on May 3.",
         "Bob paid 45 dollars for two lamps in Rome.",
         "The blender broke after two days."]


@pytest.fixture(scope="module")
def engine(require_embedded):
    require_embedded("smollm2-135m")
    import torch

    from quail_engine.infer.engine import LocalEngine

    return LocalEngine.load("smollm2-135m", dtype=torch.float32)


def _request(engine, text: str, grammar: Grammar | None, max_tokens: int = 64) -> Request:
    head, tail = engine.chat_split(text, "")
    return Request(tuple(head + tail), GenerateReadout(max_tokens=max_tokens, grammar=grammar))


def test_answers_parse_as_their_schema_in_a_mixed_batch(engine):
    obj, num = Grammar(json.dumps(OBJECT)), Grammar(json.dumps({"type": "integer"}))
    requests = [_request(engine, f"{t}\n\nExtract a JSON object with keys name and city.", obj)
                for t in TEXTS]
    requests += [_request(engine, f"{t}\n\nHow many words is that? Reply with a number.", num)
                 for t in TEXTS]
    requests.append(_request(engine, "Say hello.", None, max_tokens=8))
    answers = engine.run(requests)
    for a in answers[:3]:
        value = json.loads(a.value)
        assert set(value) == {"name", "city"}
        assert all(v is None or isinstance(v, str) for v in value.values())
    for a in answers[3:6]:
        assert isinstance(json.loads(a.value), int)
    assert isinstance(answers[6].value, str)


def test_an_answer_the_grammar_did_not_complete_is_none(engine):
    long = {"type": "object", "required": ["story"], "additionalProperties": False,
            "properties": {"story": {"type": "string"}}}
    request = _request(engine, "Write a long story about a dragon as JSON.",
                       Grammar(json.dumps(long)), max_tokens=4)
    assert engine.run([request])[0].value is None


def test_the_first_answer_of_a_batch_is_what_it_is_alone(engine):
    """Masks are computed for the batch at once: a row's answer does not depend on its
    neighbours (float32 on the CPU)."""
    obj = Grammar(json.dumps(OBJECT))
    requests = [_request(engine, f"{t}\n\nExtract a JSON object with keys name and city.", obj)
                for t in TEXTS]
    together = [a.value for a in engine.run(requests)]
    alone = [engine.run([r])[0].value for r in requests]
    assert together == alone
