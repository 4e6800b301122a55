"""Engine bookkeeping the planner reads: token counters, passes, prefix lifetime."""

from __future__ import annotations

import pytest

from quail_engine.errors import ExecutionError
from quail_engine.infer.api import BooleanReadout, GenerateReadout, Request


def test_requested_vs_fresh_tokens_with_a_shared_prefix(engine):
    engine.runner.scheduler = type(engine.runner.scheduler)(token_budget=64)
    handle = engine.add_prefix(list(range(2, 52)))          # 50 tokens, computed once
    assert engine.stats.fresh_tokens == 50 and engine.stats.forward_passes == 1
    reqs = [Request(tuple(range(60, 68)), BooleanReadout(), handle)] * 12   # 8 own tokens each
    engine.run(reqs)
    assert engine.stats.requested_tokens == 12 * 58
    assert engine.stats.fresh_tokens == 50 + 12 * 8
    assert engine.stats.forward_passes == 1 + 2             # 96 own tokens, budget 64
    assert engine.stats.prefixes_resident == 1


def test_release_frees_the_prefix_and_later_use_fails(engine):
    handle = engine.add_prefix([3, 4, 5])
    engine.retain(handle)
    engine.release(handle)
    assert engine.arena.has(handle.id) and engine.arena.bytes_in_use > 0
    engine.release(handle)
    assert not engine.arena.has(handle.id) and engine.arena.bytes_in_use == 0
    assert engine.stats.prefixes_resident == 0
    with pytest.raises(ExecutionError, match="not resident"):
        engine.run([Request((7, 8), BooleanReadout(), handle)])


def test_prefix_bytes_match_model_shape(engine, tiny_llama):
    _, _, config = tiny_llama
    handle = engine.add_prefix(list(range(2, 12)))
    per_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim * 4   # fp32 K+V
    assert engine.arena.bytes_in_use == 10 * per_token
    engine.release(handle)


@pytest.mark.parametrize("tokens", [(), ])
def test_empty_request_is_an_error(engine, tokens):
    with pytest.raises(ExecutionError, match="at least one token"):
        engine.run([Request(tokens, BooleanReadout())])


def test_prompt_longer_than_the_context_names_the_sizes(engine):
    engine.max_context = 16
    with pytest.raises(ExecutionError, match="20 tokens .* exceeds the context of 'tiny-llama' "
                                             "\\(16 tokens\\)"):
        engine.run([Request(tuple(range(2, 22)), BooleanReadout())])


def test_output_tokens_past_the_context_are_named_as_the_part_too_long(engine):
    """A prompt that fits with more requested output tokens than the context leaves: the
    message names the output tokens, not the input text (the executor gives such an answer
    the rest of the context before it gets here: exec/context_fit.py)."""
    engine.max_context = 16
    with pytest.raises(ExecutionError, match="10 requested output tokens after a prompt of 10 "
                                             "tokens exceed the context of 'tiny-llama' \\(16 "
                                             "tokens\\) by 4; lower max_tokens"):
        engine.run([Request(tuple(range(2, 12)), GenerateReadout(max_tokens=10))])
