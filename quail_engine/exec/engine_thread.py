"""The one thread that runs every engine call of the process.

Device libraries keep state per thread: PyTorch caches the execution graphs it builds for
cuDNN's fused attention per thread (aten/src/ATen/native/cudnn/MHA.cpp: "caches are now thread
local"): host time per new (query rows, keys) shape while the GPU waits. A worker made per
operator call rebuilt every graph in every call, and a star join asked chunk by chunk (one call
per chunk and join) spent much of its passes' time with the GPU waiting on such builds. One
long-lived worker builds each shape once.

The worker starts the interpreter's thread switch interval short (`handoff_interval`). Every
torch operator the worker launches lets go of the GIL and must take it back; while another
thread runs Python (the pipeline tokenizing the next batch, counting the last one's minimum,
the progress display), CPython hands the GIL back only after `sys.getswitchinterval()`, 5 ms by
default, so each launch of a pass can wait up to that long (bench/probes/gil_handoff.py). A
shorter interval bounds that wait; the other threads' Python runs a little slower, and it is
off the device's critical path.

A call made from the worker itself runs inline (an engine call that nests another must not wait
on the thread that runs it). Statements on several threads (dbt's) share the worker, each
waiting on its own calls; they share the device anyway. A forked child starts a worker of its
own.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_lock = threading.Lock()
_queue: queue.SimpleQueue | None = None
_ident: int | None = None  # the worker's thread
HANDOFF_MS = 0.1  # the switch interval while the worker exists (QUAIL_GIL_HANDOFF_MS)


def submit(fn: Callable[..., Any], *args: Any, into: list | None = None) -> Future:
    """Runs fn(*args) on the engine thread -> its Future. `into`: the Future is appended to it
    before the call is queued, so a caller interrupted (Ctrl-C) anywhere in between still holds
    every call it queued, and can cancel or wait for it."""
    future: Future = Future()
    if into is not None:
        into.append(future)
    if threading.get_ident() == _ident:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller by the Future
                future.set_exception(exc)
        return future
    _worker().put((future, fn, args))
    return future


def _worker() -> queue.SimpleQueue:
    """The worker's queue, starting the worker on first use. A daemon thread of our own, not a
    ThreadPoolExecutor's: Ctrl-C can arrive while a pool starts its thread, after the thread
    runs and before the pool registers it, and the process then never exits (the unregistered
    worker is joined at exit and never told to stop). The executor waits for every engine call
    it makes before returning, so at exit the worker is idle."""
    global _queue
    with _lock:
        if _queue is None:
            interval = handoff_interval()
            if interval is not None:
                sys.setswitchinterval(interval)
            work: queue.SimpleQueue = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(work,), name="quail-engine",
                             daemon=True).start()
            _queue = work
        return _queue


def handoff_interval() -> float | None:
    """The switch interval, in seconds, the process takes when the worker starts:
    QUAIL_GIL_HANDOFF_MS (milliseconds; 0 or "off": the interpreter's own left as it is), else
    HANDOFF_MS."""
    raw = os.environ.get("QUAIL_GIL_HANDOFF_MS", "").strip().lower()
    if raw in ("0", "off"):
        return None
    if not raw:
        return HANDOFF_MS / 1000.0
    try:
        ms = float(raw)
    except ValueError:
        ms = -1.0
    if not 0 < ms <= 1000:  # (NaN fails it too)
        raise ValueError(f"QUAIL_GIL_HANDOFF_MS must be a number of milliseconds in (0, 1000] "
                         f"or 0/off, got {raw!r}")
    return ms / 1000.0


def _serve(work: queue.SimpleQueue) -> None:
    global _ident
    _ident = threading.get_ident()
    while True:
        future, fn, args = work.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the Future
            future.set_exception(exc)
        else:
            future.set_result(result)
        del future, fn, args


def _forget() -> None:  # in a forked child: the parent's worker does not exist there
    global _queue, _ident, _lock
    _queue, _ident, _lock = None, None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
