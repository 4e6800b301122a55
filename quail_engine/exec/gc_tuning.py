"""CPython's cyclic garbage collector, run less often while a statement executes.

A query allocates millions of small objects that hold no cycles (token tuples, requests, jobs,
answers); reference counting frees them. The cyclic collector still runs every 700 net
allocations by default, and its older generations walk every live object of the process
(torch's, dbt's, the scans' rows). On a join of 44,000 pairs over a stub forward pass
(bench/probes/host_overhead.py) that was 40% of the engine thread's own time per pair, time the
GPU waits through: 23.7 us in LocalEngine._run with the default thresholds, 11.8 us with the
first generation collected every 100,000 allocations. Cycles are still collected, later.

Thresholds are process-wide: nested or concurrent statements (dbt threads) share one relaxed
setting, and the caller's thresholds come back when the last one ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

FIRST_GENERATION = 100_000  # net allocations between collections of the youngest generation

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, ...] = ()


@contextmanager
def relaxed_gc() -> Iterator[None]:
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            if _saved[0]:  # 0: the caller turned automatic collection off; leave it so
                gc.set_threshold(max(FIRST_GENERATION, _saved[0]), *_saved[1:])
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)
