"""Progress a person can follow, on stderr: a line for each stage (converting and loading the
model, measuring the CPU, sampling) and, for each AI operator, rows done/total, tokens, tokens/s
and an ETA, refreshed by a background ticker even while one long engine batch runs.

Modes, chosen once from the stream:
- terminal (a tty): one live line redrawn in place (`\\r` + clear to end of line) every 0.5 s;
  stage lines and finished operators are printed above it; `close()` leaves no half line.
- lines (no tty: a log file, CI, a pipe): plain lines for each stage and each operator's start
  and end, and a status line every `interval` seconds (default 5, never under 2) while a stage
  or an operator is in progress.
- off (`enabled=False`, the CLI's `--quiet`): nothing at all, and no thread.

What the executor calls (exec/progress_sink.py; thread-safe; the display never raises into the
query):
- `stage(text)`: a stage begins, e.g. "sampling 8 rows to estimate selectivity".
- `op_start(label, total_rows, total_tokens=None)` ... `op_done()`: one AI operator over
  `total_rows` rows (the rows that `advance` will count); `total_tokens`, the tokens it is
  expected to run (the plan's estimate), gives an ETA before the first batch ends.
- `advance(rows, tokens_total)`: `rows` more rows answered; `tokens_total` is the run's token
  count so far (cumulative). Without `op_start` it counts against `total_rows`.
- `set_token_counter(fn)`: `fn()` returns a cumulative token count, e.g.
  `lambda: engine.stats.fresh_tokens`; the ticker calls it from its own thread, so it must be
  cheap and must not load anything. With it, tokens/s and the ETA move during a batch.
- `close()`: stop the ticker and finish the display (an unfinished operator's line stays).

Lower layers (infer/, plan/) never import this module: they log stage messages at INFO on the
logger `quail_engine.stage`, which `exec.route_stages` sends into the open display (CLI:
cli/stages.py) or dbt's log (adapter).
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from quail_engine.cli.stages import register, unregister

MIN_INTERVAL = 2.0  # plain lines: never more than one status line per 2 s
TICK = 0.5  # the ticker's period
BAR_WIDTH = 20
_CLEAR = "\r\x1b[K"


@dataclass
class _Op:
    label: str | None
    total: int | None
    start: float
    base_tokens: int  # `advance`'s tokens_total when the operator began
    base_counter: int | None = None  # the token counter's value when it began
    total_tokens: int | None = None
    rows: int = 0
    tokens_at_rows: int = 0  # the operator's tokens when `rows` was last advanced


class Progress:
    def __init__(self, total_rows: int | None = None, enabled: bool | None = None,
                 stream=None, min_interval: float = 0.25, interval: float = 5.0,
                 clock: Callable[[], float] = time.monotonic,
                 wait: Callable[[float], bool] | None = None):
        """`enabled`: False shows nothing; True or None show, as a live bar on a tty and as
        plain lines otherwise. `min_interval`: least seconds between redraws caused by
        `advance` on a tty. `clock` and `wait` (the ticker's sleep, returning True to stop)
        are for tests."""
        self.stream = stream or sys.stderr
        is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.mode = "off" if enabled is False else "bar" if is_tty else "lines"
        self.total_rows, self.rows, self.tokens = total_rows, 0, 0
        self.min_interval, self.interval = min_interval, max(MIN_INTERVAL, interval)
        self.clock = clock
        self.start = clock()
        self._wait = wait
        self._counter: Callable[[], int] | None = None
        self._op: _Op | None = None
        self._stage: tuple[str, float] | None = None  # the stage in progress, since when
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_line = self.start
        self._last_draw = float("-inf")
        self._drawn = self._closed = False
        if self.enabled:
            register(self)

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def stage(self, text: str) -> None:
        with self._lock:
            if not self.enabled or self._closed:
                return
            now = self.clock()
            if self.mode == "lines":
                self._emit(f"quail: {text}", now)
                self._stage = None if self._op else (text, now)
            elif self._op is not None:
                self._above(f"quail: {text}")
            else:
                self._settle_stage()
                self._stage = (text, now)
                self._draw(now)
            self._ensure_ticker()

    def op_start(self, label: str, total_rows: int, total_tokens: int | None = None) -> None:
        with self._lock:
            if not self.enabled or self._closed:
                return
            now = self.clock()
            self._finish_op(now)
            self._settle_stage()
            self._op = op = _Op(label, total_rows, now, self.tokens, total_tokens=total_tokens)
            self._op_tokens(op)
            if self.mode == "lines":
                self._emit(self._opening(op), now)
            else:
                self._draw(now)
            self._ensure_ticker()

    def op_done(self) -> None:
        with self._lock:
            if self.enabled and not self._closed:
                self._finish_op(self.clock())

    def set_token_counter(self, counter: Callable[[], int] | None) -> None:
        with self._lock:
            op = self._op
            before = self._op_tokens(op) if op is not None else 0
            self._counter = counter
            if op is not None:  # the operator's count goes on from where it was
                value = self._read_counter()
                op.base_counter = None if value is None else value - before

    def advance(self, rows: int, tokens_total: int) -> None:
        with self._lock:
            self.rows += rows
            self.tokens = tokens_total
            if not self.enabled or self._closed:
                return
            now = self.clock()
            if self._op is None:  # no op_start: one operator over total_rows
                self._settle_stage()
                self._op = _Op(None, self.total_rows, self.start, 0)
            op = self._op
            op.rows += rows
            op.tokens_at_rows = self._op_tokens(op)
            if self.mode == "bar" and now - self._last_draw >= self.min_interval:
                self._draw(now)
            elif (self.mode == "lines" and now - self._last_line >= self.interval
                  and not (op.total and op.rows >= op.total)):  # op_done says it
                self._emit(self._status(op, now), now)
            self._ensure_ticker()

    def print_above(self, text: str) -> None:
        """Text (ending in a newline) printed above the live bar, which is then redrawn."""
        with self._lock:
            if self.mode == "bar" and self._drawn:
                self._write(_CLEAR + text)
                self._drawn = False
                self._draw(self.clock())
            else:
                self._write(text)

    def line(self, now: float | None = None) -> str:
        """The status line as it would show now (empty when nothing is in progress)."""
        with self._lock:
            return self._live(self.clock() if now is None else now) or ""

    def tick(self) -> None:
        """What the ticker does every 0.5 s: redraw the bar, or a status line when due."""
        with self._lock:
            if self._closed:
                return
            now = self.clock()
            if self.mode == "bar":
                self._draw(now)
            elif self.mode == "lines" and now - self._last_line >= self.interval:
                line = self._live(now)
                if line:
                    self._emit(line, now)

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.enabled:
                self._finish_op(self.clock())
                self._settle_stage()
                if self._drawn:
                    self._write(_CLEAR)
                    self._drawn = False
        unregister(self)

    # -- rendering (callers hold the lock) --

    def _read_counter(self) -> int | None:
        if self._counter is None:
            return None
        try:
            return int(self._counter())
        except Exception:  # noqa: BLE001 - a progress display never fails a query
            return None

    def _op_tokens(self, op: _Op) -> int:
        value = self._read_counter()
        if value is None:
            return self.tokens - op.base_tokens
        if op.base_counter is None:
            op.base_counter = value
        return value - op.base_counter

    def _status(self, op: _Op, now: float, final: bool = False) -> str:
        elapsed = max(now - op.start, 1e-9)
        tokens = self._op_tokens(op)
        done = f"{op.rows:,} row{'' if op.rows == 1 else 's'}"
        bar = ""
        if op.total:
            done = f"{op.rows:,}/{op.total:,} rows ({100 * op.rows // op.total}%)"
            if self.mode == "bar" and not final:
                filled = min(BAR_WIDTH, BAR_WIDTH * op.rows // op.total)
                bar = "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "] "
        parts = [done, f"{tokens:,} tokens", f"{tokens / elapsed:,.0f} tokens/s",
                 duration(elapsed)]
        eta = None if final else _eta(op, tokens, elapsed)
        if eta is not None:
            parts.append(f"ETA {duration(eta)}")
        head = f"quail: {op.label}: " if op.label else "quail: "
        return head + bar + ", ".join(parts)

    @staticmethod
    def _opening(op: _Op) -> str:
        rows = f"{op.total:,} row{'' if op.total == 1 else 's'}" if op.total is not None else ""
        tokens = f"~{op.total_tokens:,} tokens" if op.total_tokens else ""
        return f"quail: {op.label}: " + ", ".join(x for x in (rows, tokens) if x)

    def _live(self, now: float) -> str | None:
        if self._op is not None:
            return self._status(self._op, now)
        if self._stage is not None:
            text, since = self._stage
            return f"quail: {text} ... {duration(now - since)}"
        return None

    def _finish_op(self, now: float) -> None:
        op = self._op
        if op is None:
            return
        line = self._status(op, now, final=True)
        self._op = None
        if self.mode == "bar":
            self._above(line)
        else:
            self._emit(line, now)

    def _settle_stage(self) -> None:
        """On a tty the stage in progress lives in the bar; it becomes a line of its own when
        something else takes the bar."""
        stage, self._stage = self._stage, None
        if stage is not None and self.mode == "bar":
            self._above(f"quail: {stage[0]}")

    def _above(self, line: str) -> None:
        self._write(_CLEAR + line + "\n")
        self._drawn = False
        self._draw(self.clock())

    def _draw(self, now: float) -> None:
        line = self._live(now)
        if line is None:
            if self._drawn:
                self._write(_CLEAR)
                self._drawn = False
            return
        width = max(20, shutil.get_terminal_size((100, 24)).columns - 1)
        self._write(_CLEAR + line[:width])
        self._drawn, self._last_draw = True, now

    def _emit(self, line: str, now: float) -> None:
        self._write(line + "\n")
        self._last_line = now

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not fail the query
            pass

    def _ensure_ticker(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=_tick_loop, args=(weakref.ref(self), self._wait or self._stop.wait),
                name="quail-progress", daemon=True)
            self._thread.start()


def _tick_loop(ref: weakref.ref, wait: Callable[[float], bool]) -> None:
    """Holds the display only while ticking, so a display nobody closes is still collected."""
    while not wait(TICK):
        progress = ref()
        if progress is None or progress._closed:
            return
        progress.tick()
        del progress


def _eta(op: _Op, tokens: int, elapsed: float) -> float | None:
    """Seconds left: the tokens still to run at the rate so far, where the tokens to run are
    the expected total, else the tokens per row so far times the rows; rows alone when no token
    was counted yet."""
    if op.total and op.rows >= op.total:
        return None
    if op.total_tokens and tokens > 0:
        return max(0.0, op.total_tokens - tokens) / (tokens / elapsed)
    if not op.total or op.rows <= 0:
        return None
    if op.tokens_at_rows > 0 and tokens > 0:
        expected = op.tokens_at_rows / op.rows * op.total
        return max(0.0, expected - tokens) / (tokens / elapsed)
    return elapsed / op.rows * (op.total - op.rows)


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    s = int(seconds)
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"
