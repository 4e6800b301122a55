"""The progress display as a person sees it: a live bar redrawn in place on a terminal, plain
lines in a log, nothing with --quiet; updates during a long stretch without `advance`; totals,
tokens/s and ETA; stage messages routed from the `quail_engine.stage` logger."""

from __future__ import annotations

import io
import logging
import re

import pytest

from quail_engine.cli.progress import Progress
from quail_engine.cli.stages import StderrAboveBar, show_stage
from quail_engine.exec.stage_routing import route_stages


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    """The live line is cut to the terminal's width (shutil.get_terminal_size: $COLUMNS first):
    these tests read whole lines, so they fix a wide one instead of inheriting the runner's (a
    pytest-xdist worker's is 80 columns)."""
    monkeypatch.setenv("COLUMNS", "200")

CLEAR = "\r\x1b[K"


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Stream(io.StringIO):
    """stderr as written: each write with the fake time it happened at."""

    def __init__(self, clock: Clock, tty: bool):
        super().__init__()
        self.clock, self.tty, self.writes = clock, tty, []

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        self.writes.append((self.clock.t, text))
        return super().write(text)

    def lines(self) -> list[str]:
        return self.getvalue().splitlines()


def screen(text: str) -> list[str]:
    """What a terminal shows after `text`: \\r returns to column 0, ESC[K clears to the end."""
    rows, col = [""], 0
    i = 0
    while i < len(text):
        if text.startswith("\x1b[K", i):
            rows[-1] = rows[-1][:col]
            i += 3
            continue
        ch = text[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            rows.append("")
            col = 0
        else:
            rows[-1] = rows[-1][:col] + ch + rows[-1][col + 1:]
            col += 1
        i += 1
    return rows


def ticker_until(clock: Clock, end: float, on_tick=None):
    """The ticker's sleep: moves the fake clock instead of waiting, stops at `end`."""
    def wait(seconds: float) -> bool:
        if clock.t >= end:
            return True
        clock.t += seconds
        if on_tick is not None:
            on_tick()
        return False
    return wait


def no_ticker(seconds: float) -> bool:
    return True


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def stage_routing():
    route_stages(show_stage)
    yield logging.getLogger("quail_engine.stage")
    route_stages(None)


def test_terminal_bar_moves_every_half_second_through_one_long_batch(clock):
    tty = Stream(clock, tty=True)
    tokens = {"n": 0}

    def generate():  # the engine's counter grows during the batch; no advance comes
        tokens["n"] += 50

    p = Progress(stream=tty, clock=clock, wait=ticker_until(clock, 60.0, generate))
    p.set_token_counter(lambda: tokens["n"])
    p.op_start("op 1 ai_filter", 400)
    p.close()  # joins the ticker, which ran the fake clock to 60 s
    draws = [(t, text) for t, text in tty.writes if "op 1 ai_filter" in text]
    times = [t for t, _ in draws]
    assert times[-1] >= 59.5 and max(b - a for a, b in zip(times, times[1:])) <= 2.0
    at_30 = next(text for t, text in draws if t == 30.0)
    assert "0/400 rows (0%)" in at_30 and "3,000 tokens" in at_30 and "100 tokens/s" in at_30
    assert "30 s" in at_30


def test_terminal_redraws_in_place_with_stage_lines_above(clock):
    tty = Stream(clock, tty=True)
    p = Progress(stream=tty, clock=clock, wait=no_ticker)
    p.stage("loading the model smollm2-135m")
    clock.t = 2.0
    live = screen(tty.getvalue())
    assert live == ["quail: loading the model smollm2-135m ... 0.0 s"]
    p.stage("measuring the CPU")
    p.op_start("op 1 ai_filter", 5)
    for t in (3.0, 4.0):
        clock.t = t
        p.advance(2, int(t * 100))
    live = screen(tty.getvalue())
    assert live[:2] == ["quail: loading the model smollm2-135m", "quail: measuring the CPU"]
    assert len(live) == 3 and live[2].startswith("quail: op 1 ai_filter: [########")
    assert "4/5 rows (80%)" in live[2]
    assert all(text.startswith("\r") for _, text in tty.writes)  # every write redraws in place
    clock.t = 5.0
    p.advance(1, 500)
    p.op_done()
    p.close()
    final = screen(tty.getvalue())
    assert final[-1] == ""  # the cursor sits on a clean line: nothing half drawn
    assert final[2] == "quail: op 1 ai_filter: 5/5 rows (100%), 500 tokens, 167 tokens/s, 3.0 s"


def test_plain_lines_without_a_terminal_every_interval_never_faster_than_2s(clock):
    log = Stream(clock, tty=False)
    p = Progress(stream=log, clock=clock, wait=ticker_until(clock, 31.0))
    p.stage("converting the model smollm2-135m (first use, ~30 s)")
    p.close()
    lines = log.lines()
    assert lines[0] == "quail: converting the model smollm2-135m (first use, ~30 s)"
    assert lines[1:] == [f"quail: converting the model smollm2-135m (first use, ~30 s) ... {s}"
                         for s in ("5.0 s", "10 s", "15 s", "20 s", "25 s", "30 s")]
    assert "\r" not in log.getvalue() and "\x1b" not in log.getvalue()

    clock.t = 0.0
    fast = Stream(clock, tty=False)
    p = Progress(stream=fast, clock=clock, interval=0.5, wait=ticker_until(clock, 20.0))
    p.op_start("op 3 ai_classify", 10)
    p.close()
    times = [t for t, _ in fast.writes][:-1]  # but the last: the operator's final line
    assert len(times) >= 10 and min(b - a for a, b in zip(times, times[1:])) >= 2.0


def test_totals_tokens_per_second_and_eta(clock):
    log = Stream(clock, tty=False)
    p = Progress(stream=log, clock=clock, wait=no_ticker)
    p.op_start("op 2 ai_classify", 100)
    clock.t = 10.0
    p.advance(25, 1000)
    assert p.line() == ("quail: op 2 ai_classify: 25/100 rows (25%), 1,000 tokens, "
                        "100 tokens/s, 10 s, ETA 30 s")
    tokens = {"n": 1000}
    p.set_token_counter(lambda: tokens["n"])  # live from here on, continuing the same count
    clock.t, tokens["n"] = 15.0, 1500
    # 40 tokens a row so far: 4,000 for 100 rows, 2,500 still to go at 100 tokens/s
    assert p.line().endswith("25/100 rows (25%), 1,500 tokens, 100 tokens/s, 15 s, ETA 25 s")
    clock.t, tokens["n"] = 200.0, 20_000
    p.advance(75, 0)
    p.op_done()
    p.close()
    assert log.lines() == [
        "quail: op 2 ai_classify: 100 rows",
        "quail: op 2 ai_classify: 25/100 rows (25%), 1,000 tokens, 100 tokens/s, 10 s, ETA 30 s",
        "quail: op 2 ai_classify: 100/100 rows (100%), 20,000 tokens, 100 tokens/s, 3m 20s",
    ]


def test_each_operator_counts_its_own_rows_and_tokens(clock):
    log = Stream(clock, tty=False)
    p = Progress(stream=log, clock=clock, wait=no_ticker)
    p.op_start("op 1 ai_filter", 4)
    clock.t = 2.0
    p.advance(4, 400)
    p.op_done()
    p.op_start("op 2 ai_filter", 2)
    clock.t = 4.0
    p.advance(2, 600)
    p.op_done()
    p.close()
    assert log.lines()[-1] == ("quail: op 2 ai_filter: 2/2 rows (100%), 200 tokens, "
                               "100 tokens/s, 2.0 s")


def test_quiet_prints_nothing(clock, stage_routing):
    tty = Stream(clock, tty=True)
    p = Progress(enabled=False, stream=tty, clock=clock, wait=ticker_until(clock, 30.0))
    p.stage("loading the model")
    p.op_start("op 1 ai_filter", 5)
    p.advance(5, 100)
    stage_routing.info("measuring the CPU")  # goes to the open display, which is off
    p.op_done()
    p.close()
    assert tty.getvalue() == ""


def test_advance_alone_still_shows_rows_and_tokens(clock):
    tty = Stream(clock, tty=True)
    p = Progress(total_rows=10, stream=tty, min_interval=0, clock=clock, wait=no_ticker)
    clock.t = 1.0
    p.advance(5, 100)
    p.close()
    assert screen(tty.getvalue()) == ["quail: 5/10 rows (50%), 100 tokens, 100 tokens/s, 1.0 s",
                                      ""]


def test_stage_log_records_reach_the_open_display_else_a_plain_line(clock, stage_routing,
                                                                     capsys):
    log = Stream(clock, tty=False)
    p = Progress(stream=log, clock=clock, wait=no_ticker)
    stage_routing.info("loading the model %s", "smollm2-135m")
    p.close()
    stage_routing.info("measuring the CPU")
    assert log.lines() == ["quail: loading the model smollm2-135m"]
    assert capsys.readouterr().err == "quail: measuring the CPU\n"
    route_stages(None)
    stage_routing.info("nothing routed")
    assert capsys.readouterr().err == ""


def test_a_failing_token_counter_does_not_fail_the_query(clock):
    log = Stream(clock, tty=False)
    p = Progress(stream=log, clock=clock, wait=no_ticker)
    p.set_token_counter(lambda: 1 // 0)
    p.op_start("op 1 ai_filter", 2)
    clock.t = 1.0
    p.advance(2, 50)
    p.op_done()
    p.close()
    assert re.search(r"2/2 rows \(100%\), 50 tokens", log.getvalue())


def test_expected_tokens_give_an_eta_inside_the_first_batch(clock):
    tokens = {"n": 0}
    p = Progress(stream=Stream(clock, tty=False), clock=clock, wait=no_ticker)
    p.set_token_counter(lambda: tokens["n"])
    p.op_start("op 1 ai_filter", 256, total_tokens=10_000)
    assert "ETA" not in p.line()  # no rate yet
    clock.t, tokens["n"] = 25.0, 2_500  # one batch of all 256 rows is running
    assert p.line().endswith("0/256 rows (0%), 2,500 tokens, 100 tokens/s, 25 s, ETA 1m 15s")
    p.close()


def test_a_log_line_lands_above_the_live_bar(clock):
    tty = Stream(clock, tty=True)
    handler = logging.StreamHandler(StderrAboveBar())
    logger = logging.getLogger("quail_engine.test_progress")
    logger.addHandler(handler)
    try:
        p = Progress(stream=tty, clock=clock, wait=no_ticker)
        p.op_start("op 1 ai_filter", 5)
        logger.warning("GPU kernels unavailable; running the plain-torch engine")
        assert screen(tty.getvalue()) == [
            "GPU kernels unavailable; running the plain-torch engine",
            "quail: op 1 ai_filter: [....................] 0/5 rows (0%), 0 tokens, 0 tokens/s, "
            "0.0 s"]
        p.close()
    finally:
        logger.removeHandler(handler)
