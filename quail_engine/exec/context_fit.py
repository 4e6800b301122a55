"""A request's prompt and its answer within the model's context.

The prompt and the tokens its answer may take share the context. A prompt that fits leaves the
answer what it asked for (max_tokens, max_output_tokens), or the rest of the context where that
is less: the answer may then stop earlier, as a vendor's does at its model's own limit, rather
than the query stopping. Only a prompt that fills the context by itself is cut (its beginning
and its end kept, counted as truncated) or, with on_long 'error', refused.
"""

from __future__ import annotations

import dataclasses

from quail_engine.errors import ExecutionError
from quail_engine.infer.api import GenerateReadout


def fit_request(tokens: list[int], prefix_len: int, answer: int, max_context: int, rep,
                on_long: str) -> tuple[list[int], int]:
    """(prompt tokens, answer tokens) of a request of `tokens` after a resident prefix of
    `prefix_len` tokens whose answer asks for `answer` tokens (1 where it is read from one
    token's logits), within `max_context`. A cut prompt keeps at most half of the context past
    its prefix for the answer, so a max_tokens as large as the context still leaves the
    document something; `rep` counts the cut."""
    room = max_context - prefix_len
    if len(tokens) < room:
        return tokens, min(answer, room - len(tokens))
    if on_long == "error":
        raise ExecutionError(f"a prompt of {prefix_len + len(tokens)} tokens exceeds the context "
                             f"of {max_context} tokens by itself, before any of its answer's "
                             "tokens (on_long='error'; max_context sets the context)")
    rep.truncated += 1
    answer = min(answer, max(1, room // 2))
    limit = room - answer
    keep_tail = min(len(tokens), max(1, limit // 2))
    return tokens[:max(0, limit - keep_tail)] + tokens[len(tokens) - keep_tail:], answer


def within_budget(readout, budget: int):
    """`readout` generating at most `budget` tokens (itself where it asks no more, or is not
    a generation)."""
    if isinstance(readout, GenerateReadout) and readout.max_tokens > budget:
        return dataclasses.replace(readout, max_tokens=budget)
    return readout
