"""A request's prompt and answer within the context (exec/context_fit.py): an answer whose
requested tokens do not fit after its prompt gets what the context leaves; only a prompt that
fills the context by itself is cut, or refused under on_long 'error'."""

from __future__ import annotations

import types

import pytest

from quail_engine.errors import ExecutionError
from quail_engine.exec.context_fit import fit_request, within_budget
from quail_engine.infer.api import BooleanReadout, GenerateReadout


@pytest.mark.parametrize("prompt,prefix,answer,context,kept,budget,truncated", [
    (10, 0, 48, 100, 10, 48, 0),         # both fit
    (10, 0, 90, 100, 10, 90, 0),         # exactly the context
    (15, 0, 8192, 8192, 15, 8177, 0),    # max_tokens as large as the context: what is left
    (99, 0, 48, 100, 99, 1, 0),          # the prompt leaves one token
    (30, 50, 8192, 100, 30, 20, 0),      # after a resident prefix
    (10, 0, 1, 100, 10, 1, 0),           # read from one token's logits
    (100, 0, 1, 100, 99, 1, 1),          # a prompt that fills the context: cut, as before
    (300, 0, 48, 100, 52, 48, 1),        # cut to leave the answer all it asked for
    (300, 0, 8192, 100, 50, 50, 1),      # cut to half: the document keeps something
    (60, 50, 8192, 100, 25, 25, 1),
])
def test_prompt_and_answer_within_the_context(prompt, prefix, answer, context, kept, budget,
                                              truncated):
    rep = types.SimpleNamespace(truncated=0)
    tokens, got = fit_request(list(range(prompt)), prefix, answer, context, rep, "truncate")
    assert (len(tokens), got, rep.truncated) == (kept, budget, truncated)
    assert prefix + len(tokens) + got <= context
    if truncated:  # its beginning and its end (the question) kept
        assert tokens[0] == 0 and tokens[-1] == prompt - 1


def test_only_a_prompt_that_fills_the_context_by_itself_is_refused():
    rep = types.SimpleNamespace(truncated=0)
    assert fit_request(list(range(15)), 0, 8192, 8192, rep, "error") == (list(range(15)), 8177)
    with pytest.raises(ExecutionError, match=r"a prompt of 130 tokens exceeds the context of "
                                             r"100 tokens by itself, before any of its answer"):
        fit_request(list(range(80)), 50, 8192, 100, rep, "error")


def test_a_budget_lowers_only_a_generation_that_asks_for_more():
    assert within_budget(GenerateReadout(max_tokens=8192, stop=("x",)), 20) == GenerateReadout(
        max_tokens=20, stop=("x",))
    assert within_budget(GenerateReadout(max_tokens=8), 20) == GenerateReadout(max_tokens=8)
    assert within_budget(BooleanReadout(), 1) == BooleanReadout()
