"""AI work is serialized per device: one lock per device name, shared by the whole process."""

from __future__ import annotations

import threading

_GUARD = threading.Lock()
_LOCKS: dict[str, threading.RLock] = {}


def device_lock(device: str) -> threading.RLock:
    """The process-wide lock of `device` ("cpu", "cuda:0", ...)."""
    with _GUARD:
        return _LOCKS.setdefault(device, threading.RLock())


class StatementLock:
    """The device lock as one statement's AI functions take it. While the statement itself holds
    the device lock and waits on DuckDB (a scan whose SQL calls AI functions, run during
    planning), its functions run under that hold — taking the device lock from DuckDB's threads
    would deadlock — one at a time; otherwise they take the device lock."""

    def __init__(self, lock: threading.RLock):
        self.lock = lock
        self.held_by_statement = False
        self._inner = threading.Lock()
        self._taken = threading.local()

    def __enter__(self) -> StatementLock:
        taken = self._inner if self.held_by_statement else self.lock
        taken.acquire()
        self._taken.lock = taken
        return self

    def __exit__(self, *exc) -> None:
        self._taken.lock.release()
