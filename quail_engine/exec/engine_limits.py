"""A session's engine limits (SessionConfig.max_context, max_new_tokens) around a loaded
engine, whatever its class.

`max_context` lowers the context the executor fits prompts into (longer documents are cut by the
executor's policy); `max_new_tokens` caps every generated answer, whatever the model SQL asks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from quail_engine.infer.api import GenerateReadout, Request


class LimitedEngine:
    """Delegates everything to `engine`, with `max_context` and generation length capped."""

    def __init__(self, engine: Any, max_context: int | None = None,
                 max_new_tokens: int | None = None):
        self._engine = engine
        self._max_new_tokens = max_new_tokens
        self.max_context = min(engine.max_context, max_context or engine.max_context)

    @property
    def max_new_tokens(self) -> int | None:
        """The cap on every generated answer's tokens (None: none)."""
        return self._max_new_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def run(self, requests: Sequence[Request]) -> list[Any]:
        if self._max_new_tokens is not None:
            requests = [self._capped(r) for r in requests]
        return self._engine.run(requests)

    def offer(self, requests: Sequence[Request]) -> None:
        """The next call's requests, capped as `run` will cap them (infer's Generation.offer)."""
        offer = getattr(self._engine, "offer", None)
        if offer is not None:
            offer([self._capped(r) for r in requests] if self._max_new_tokens is not None
                  else requests)

    def _capped(self, request: Request) -> Request:
        readout = request.readout
        if isinstance(readout, GenerateReadout) and readout.max_tokens > self._max_new_tokens:
            readout = dataclasses.replace(readout, max_tokens=self._max_new_tokens)
            return dataclasses.replace(request, readout=readout)
        return request
