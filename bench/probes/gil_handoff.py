"""What another thread's Python costs the engine thread's launches, by interpreter switch interval.

Every torch operator lets go of the GIL while it runs and takes it back after; a kernel launch
from Python is such a call. While another thread runs Python (the batch pipeline tokenizing the
next batch, counting the report's minimum, the progress display), CPython hands the GIL back to a
waiting thread only once `sys.getswitchinterval()` has passed (5 ms by default), so each launch
can wait that long. This times operators issued from one thread, alone and beside a thread
running a pure-Python loop, at several intervals, and how fast that loop still runs
(exec/engine_thread.py sets the interval the product uses).

    python -m bench.probes.gil_handoff [--ops 2000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import threading
import time
from contextlib import contextmanager

import torch

INTERVALS_MS = (5.0, 0.5, 0.1, 0.05, 0.02)


def _ops(x: torch.Tensor, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        torch.add(x, 1.0)
    return time.perf_counter() - t0


def _busy(stop: threading.Event, count: list[int]) -> None:
    s = 0
    while not stop.is_set():
        for i in range(1000):
            s += i * i
        count[0] += 1


@contextmanager
def _python_thread():
    """A thread running a pure-Python loop for the block -> its iteration count (a list)."""
    stop, count = threading.Event(), [0]
    t = threading.Thread(target=_busy, args=(stop, count))
    t.start()
    time.sleep(0.05)
    try:
        yield count
    finally:
        stop.set()
        t.join()


def measure(ops: int, seconds: float = 1.0) -> list[dict]:
    x = torch.zeros(16)
    with _python_thread() as count:
        c0, t0 = count[0], time.perf_counter()
        time.sleep(seconds)
        alone_rate = (count[0] - c0) / (time.perf_counter() - t0)
    before = sys.getswitchinterval()
    rows = []
    try:
        for ms in INTERVALS_MS:
            sys.setswitchinterval(ms / 1000.0)
            alone = _ops(x, ops)
            with _python_thread() as count:
                c0, t0 = count[0], time.perf_counter()
                beside = _ops(x, ops)
                rate = (count[0] - c0) / (time.perf_counter() - t0)
            rows.append({"interval_ms": ms, "us_per_op_alone": round(1e6 * alone / ops, 2),
                         "us_per_op_beside_python": round(1e6 * beside / ops, 2),
                         "python_loop_rate": round(rate / alone_rate, 2)})
    finally:
        sys.setswitchinterval(before)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    rows = measure(args.ops)
    result = {"machine": platform.processor() or platform.machine(), "python":
              platform.python_version(), "torch": torch.__version__, "ops": args.ops,
              "rows": rows}
    for r in rows:
        print(json.dumps(r))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
