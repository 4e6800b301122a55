"""AI work is serialized per device: one lock per device name, shared by the whole process."""

from __future__ import annotations

import threading

_GUARD = threading.Lock()
_LOCKS: dict[str, threading.RLock] = {}


def device_lock(device: str) -> threading.RLock:
    """The process-wide lock of `device` ("cpu", "cuda:0", ...)."""
    with _GUARD:
        return _LOCKS.setdefault(device, threading.RLock())
