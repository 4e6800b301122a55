"""Stopping an engine's work mid-call: Ctrl-C in the command line or the Python API.

A CPU forward pass over a long prompt runs for seconds and an engine call for several passes,
so waiting for the call to end would leave Ctrl-C without effect for as long. The engine's
`StopFlag` is checked before every forward pass and between the layers of the plain-torch
model; once set, the work raises `Interrupted` there. The executor sets it only when the
caller was interrupted (KeyboardInterrupt) and clears it once the engine's calls have ended.
dbt's cancellation stops at the next engine call instead (dbt/adapters/quail/cancel.py): its
engine outlives the cancelled model.
"""

from __future__ import annotations

import threading

from quail_engine.errors import ExecutionError


class Interrupted(ExecutionError):
    """The engine's work was stopped by its StopFlag."""


class StopFlag:
    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def check(self) -> None:
        if self._event.is_set():
            raise Interrupted("the engine's work was interrupted")
