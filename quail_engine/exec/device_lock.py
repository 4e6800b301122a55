"""AI work is serialized per device: inside a process by one lock per device name, across
processes sharing a cache root by an advisory file lock (`<cache root>/locks/<device>.lock`)
that holds its owner's pid.

A process that finds the device taken by another says so once on the stage logger ("waiting for
another quail process using cpu (pid 123)") and waits. The kernel drops a file lock when its
holder exits, however it exits (SIGKILL included), so a dead holder never blocks the device.
Callers look up cached answers only after taking the lock: a process that waited finds the
other's answers in the cache instead of computing them again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from quail_engine.settings import cache_path

try:
    import fcntl
except ImportError:  # Windows: the thread lock alone (processes may then share the device)
    fcntl = None

log = logging.getLogger(__name__)
stage = logging.getLogger("quail_engine.stage")

_GUARD = threading.Lock()
_LOCKS: dict[str, DeviceLock] = {}


def device_name(device: str) -> str:
    """One name per device: "cuda" is "cuda:0", as the engine places it."""
    return "cuda:0" if device == "cuda" else device


def device_lock(device: str) -> DeviceLock:
    """The lock of `device` ("cpu", "cuda:0", ...), one per process."""
    name = device_name(device)
    with _GUARD:
        return _LOCKS.setdefault(name, DeviceLock(name))


class DeviceLock:
    """A reentrant lock of one device: a thread lock, plus the device's file lock while this
    process holds it (taken at the outermost acquire, dropped at the matching release).
    `path`: the lock file; default `<cache root>/locks/<device>.lock`, resolved at each
    outermost acquire (the cache root follows $QUAIL_CACHE_DIR)."""

    def __init__(self, device: str, path: str | Path | None = None):
        self.device, self.path = device, None if path is None else Path(path)
        self._thread_lock = threading.RLock()
        self._depth = 0  # read and written only by the thread holding _thread_lock
        self._fd: int | None = None
        self._told: set[str] = set()  # holders this process said it waits for
        self._warned = False

    def acquire(self) -> bool:
        self._thread_lock.acquire()
        if self._depth == 0:
            try:
                self._fd = self._lock_file()
            except BaseException:
                self._thread_lock.release()
                raise
        self._depth += 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the file lock
            self._fd = None
        self._thread_lock.release()

    def __enter__(self) -> DeviceLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _lock_file(self) -> int | None:
        if fcntl is None:
            return None
        path = self.path or cache_path("locks") / (
            "".join(c if c.isalnum() else "_" for c in self.device) + ".lock")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:  # a read-only cache: run, without waiting for other processes
            if not self._warned:
                self._warned = True
                log.warning("device lock %s unusable (%s); not coordinating with other quail "
                            "processes", path, exc)
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._tell_waiting(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _tell_waiting(self, fd: int) -> None:
        holder = ""
        for _ in range(20):  # the holder writes its pid just after taking the lock
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            if holder:
                break
            time.sleep(0.01)
        if holder not in self._told:
            self._told.add(holder)
            stage.info("waiting for another quail process using %s (pid %s)", self.device,
                       holder or "unknown")


class StatementLock:
    """The device lock as one statement's AI functions take it. While the statement itself holds
    the device lock and waits on DuckDB (a scan whose SQL calls AI functions, run during
    planning), its functions run under that hold — taking the device lock from DuckDB's threads
    would deadlock — one at a time; otherwise they take the device lock."""

    def __init__(self, lock: DeviceLock):
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
