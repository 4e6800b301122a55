"""CPU threads per forward pass: this process's CPUs, less the cores other processes used on them
since the last pass.

Why: the CPU engine runs many small ops per layer, each ending at an OpenMP barrier. When another
process takes one of two cores, every barrier waits for the thread it preempted, and the work
runs several times slower than when idle, slower even than on one thread (`python -m bench
engine-cpu --busy K`, bench/engine_cpu.py, measures it beside K busy loops). With one thread per
free core nobody is waited for. OpenMP's passive wait policy also avoids the collapse but slows
the idle case (a sleeping thread is woken for every op); threads sized per pass keep the idle
speed. Other processes' use is measured from /proc/stat over the interval (not an instant), on
this process's CPUs only, so a busy host outside our cpuset does not count.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from quail_engine.settings import cpu_threads

PROC_STAT = Path("/proc/stat")
MIN_INTERVAL = 0.2  # seconds: /proc/stat counts in 10 ms ticks; decode steps reuse the decision


def busy_seconds(stat_text: str, cpus: set[int], tick: float) -> float:
    """CPU seconds the `cpus` spent not idle (user, nice, system, irq, softirq, steal), from the
    per-CPU lines of /proc/stat."""
    total = 0
    for line in stat_text.splitlines()[1:]:
        name, *values = line.split()
        if not name.startswith("cpu"):
            break
        if int(name[3:]) in cpus:
            ticks = [int(v) for v in values[:8]]
            total += sum(ticks) - ticks[3] - ticks[4]  # less idle and iowait
    return total / tick


class ThreadGovernor:
    """Call before each forward pass; sets torch's thread count for it.

    `max_threads`: the most it uses (the thread count torch started with, which honours
    OMP_NUM_THREADS and torch.set_num_threads, capped by the CPUs this process may use)."""

    def __init__(self, max_threads: int, cpus: set[int] | None = None,
                 read_stat: Callable[[], str] = PROC_STAT.read_text,
                 clock: Callable[[], float] = time.monotonic,
                 cpu_time: Callable[[], float] = time.process_time,
                 set_threads: Callable[[int], None] | None = None):
        self.cpus = cpus if cpus is not None else os.sched_getaffinity(0)
        self.max_threads = max(1, min(max_threads, cpu_threads()))
        self.threads = self.max_threads
        self.passes: Counter[int] = Counter()  # forward passes run at each thread count
        self._read_stat, self._clock, self._cpu_time = read_stat, clock, cpu_time
        self._set_threads = set_threads or _torch_set_num_threads
        self._tick = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self._last = self._sample()

    @classmethod
    def for_this_process(cls) -> ThreadGovernor | None:
        """A governor when /proc/stat and the affinity mask can be read (Linux), else None."""
        import torch  # (deferred: torch; this module is otherwise light)

        if not hasattr(os, "sched_getaffinity") or not PROC_STAT.exists():
            return None
        return cls(torch.get_num_threads())

    def _sample(self) -> tuple[float, float, float]:
        return (self._clock(), busy_seconds(self._read_stat(), self.cpus, self._tick),
                self._cpu_time())

    def others(self) -> float | None:
        """Cores of our CPUs other processes used since the last decision (None: too soon)."""
        now = self._sample()
        wall = now[0] - self._last[0]
        if wall < MIN_INTERVAL:
            return None
        busy, ours = now[1] - self._last[1], now[2] - self._last[2]
        self._last = now
        return max(0.0, busy - ours) / wall

    def __call__(self, *_hook_args) -> None:
        others = self.others()
        if others is not None:
            threads = max(1, min(self.max_threads, len(self.cpus) - round(others)))
            if threads != self.threads:
                self._set_threads(threads)
                self.threads = threads
        self.passes[self.threads] += 1


def _torch_set_num_threads(threads: int) -> None:
    import torch  # (deferred: torch, as in for_this_process)

    torch.set_num_threads(threads)
