"""Ctrl-C during `dbt run`: the AI work stops at the next engine call, and dbt's own traceback
for the interrupt stays in logs/dbt.log instead of the console.

On Ctrl-C dbt's main thread cancels every open connection (`ConnectionManager.cancel_open`,
then `cancel(connection)` for each) and waits for the worker threads to return. DuckDB
statements are interrupted by dbt-duckdb; an AI model's worker is inside the executor, which
calls the engine batch by batch (a few seconds each). Each connection gets an Event: `cancel`
sets it, and the engine the model's session sees (`CancellableEngine`) raises `RunCancelled`
before its next batch or prefix encoding. Nothing is written to the database before the AI
work is done (see impl.py), so the previous table stays; answers of finished batches are
already in the answer cache, so the next run resumes there.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

from quail_engine.exec import ExecutionError

_EVENTS: dict[int, threading.Event] = {}
_EVENTS_LOCK = threading.Lock()


class RunCancelled(ExecutionError):
    """The dbt run was cancelled (Ctrl-C) while this model's AI work ran."""


def cancel_event(connection: Any) -> threading.Event:
    """The Event that cancels AI work running on `connection` (a dbt Connection, which is
    unhashable: kept by id for as long as the connection lives)."""
    key = id(connection)
    with _EVENTS_LOCK:
        event = _EVENTS.get(key)
        if event is None:
            event = _EVENTS[key] = threading.Event()
            weakref.finalize(connection, _forget, key)
        return event


def _forget(key: int) -> None:
    with _EVENTS_LOCK:
        _EVENTS.pop(key, None)


def check(cancelled: threading.Event | None) -> None:
    if cancelled is not None and cancelled.is_set():
        raise RunCancelled("the dbt run was cancelled")


class CancellableEngine:
    """Delegates to `engine`; its work calls (`run`, `add_prefix`, `add_prefixes`) raise
    RunCancelled once `cancelled` is set. Releasing KV handles keeps working, so the executor's
    cleanup still runs."""

    def __init__(self, engine: Any, cancelled: threading.Event):
        self._engine = engine
        self._cancelled = cancelled

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def run(self, requests: Sequence[Any]) -> list[Any]:
        check(self._cancelled)
        return self._engine.run(requests)

    def add_prefix(self, tokens: Sequence[int]) -> Any:
        check(self._cancelled)
        return self._engine.add_prefix(tokens)

    def add_prefixes(self, token_lists: Sequence[Sequence[int]]) -> list[Any]:
        check(self._cancelled)
        return self._engine.add_prefixes(token_lists)

    def extend_prefixes(self, handles: Sequence[Any], tokens: Sequence[int]) -> list[Any]:
        check(self._cancelled)
        return self._engine.extend_prefixes(handles, tokens)


def quiet_interrupt_traceback() -> None:
    """Keep dbt's traceback of a KeyboardInterrupt off the console (it stays in dbt.log).

    dbt-core 1.5+ prints the main thread's KeyboardInterrupt stack trace after "Exited because
    of keyboard interrupt" for every adapter (dbt-labs/dbt-core#8338, whose fix wanted it in
    the log file only). Called when dbt cancels the open connections, so only the console
    logger of an interrupted invocation changes; a no-op if dbt's event internals differ."""
    try:
        from dbt_common.events.event_manager_client import get_event_manager
    except ImportError:
        return
    for logger in getattr(get_event_manager(), "loggers", []):
        if getattr(logger, "name", None) != "stdout_log" or \
                getattr(logger, "_quail_quiet_interrupt", False):
            continue
        keep = logger.filter

        def console_filter(msg: Any, keep: Any = keep) -> bool:
            return keep(msg) and not _interrupt_noise(msg)

        logger.filter = console_filter
        logger._quail_quiet_interrupt = True


def _interrupt_noise(msg: Any) -> bool:
    """dbt's 'Encountered an error:' with an empty message and its stack trace, for an
    interrupted run (str(KeyboardInterrupt()) is empty)."""
    try:
        name, data = msg.info.name, msg.data
        if name == "MainStackTrace":
            return data.stack_trace.rstrip().endswith("KeyboardInterrupt")
        if name == "MainEncounteredError":
            return not data.exc.strip()
    except AttributeError:
        pass
    return False
