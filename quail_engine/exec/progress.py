"""A one-line progress bar on stderr: rows and tokens done, tokens/s. Silent unless stderr is a
terminal (and not --quiet); it redraws at most a few times per second."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total_rows: int | None = None, enabled: bool | None = None,
                 stream=None, min_interval: float = 0.25):
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.total_rows = total_rows
        self.rows = 0
        self.tokens = 0
        self.start = time.perf_counter()
        self._last = 0.0
        self.min_interval = min_interval

    def advance(self, rows: int, tokens_total: int) -> None:
        self.rows += rows
        self.tokens = tokens_total
        now = time.perf_counter()
        if self.enabled and now - self._last >= self.min_interval:
            self._last = now
            self.stream.write("\r" + self.line(now))
            self.stream.flush()

    def line(self, now: float | None = None) -> str:
        elapsed = max(1e-9, (now or time.perf_counter()) - self.start)
        total = f"/{self.total_rows}" if self.total_rows else ""
        return (f"quail: {self.rows}{total} prompts, {self.tokens} tokens, "
                f"{self.tokens / elapsed:,.0f} tokens/s, {elapsed:.1f} s")

    def close(self) -> None:
        if self.enabled and self._last:
            self.stream.write("\r" + self.line() + "\n")
            self.stream.flush()
