"""Ctrl-C while an operator's batches run: the batch queued behind the running one never
reaches the engine, the running one is interrupted (infer/interrupt.py), the engine's flag is
cleared afterwards and the KeyboardInterrupt reaches the caller."""

from __future__ import annotations

import signal
import threading

import pytest
from exec_fakes import FakeEngine, bfilter

from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.report import Report
from quail_engine.infer.interrupt import Interrupted


class StuckEngine(FakeEngine):
    """Its first batch runs until interrupted (a long CPU pass); later batches are counted."""

    def __init__(self):
        super().__init__()
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.resumed = False

    def run(self, requests):
        self.calls += 1
        self.started.set()
        if not self.stopped.wait(timeout=600):
            raise AssertionError("the running batch was never interrupted")
        raise Interrupted("stopped")

    def interrupt(self):
        self.stopped.set()

    def resume(self):
        self.resumed = True


@pytest.fixture
def python_ctrl_c():
    """Python's own SIGINT handler for the test, as `quail query` has it. A library an earlier
    test loaded into the same pytest worker can leave the process's SIGINT disposition such
    that Python never sees the signal (seen in a local CI run: the hung worker still held Ray's
    core-worker threads), and the test then waited out its 600 s timeout; installing the
    handler again restores Python's."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_drops_queued_batches_and_interrupts_the_running_one(tmp_path, python_ctrl_c):
    engine = StuckEngine()
    runner = OpRunner(engine, AnswerCache.in_dir(tmp_path), Report(), calibrate=False)
    runner.sizer.batch_prompts = lambda tokens, op=0: 2  # three batches of two rows
    op = bfilter("Is the PRICE right?")
    rows = [(f"review {i} about the price",) for i in range(6)]

    main = threading.main_thread().ident

    def press_ctrl_c():  # a real SIGINT to the main thread, which waits on the running batch
        engine.started.wait(timeout=600)
        # pressed again every 2 s until the engine is told to stop, as a user would: in two
        # loaded local pytest-xdist runs the first signal was never seen (the main thread kept
        # waiting on the running batch for the whole 600 s; cause not found, not reproduced
        # alone or after the same files in one process)
        for _ in range(30):
            signal.pthread_kill(main, signal.SIGINT)
            if engine.stopped.wait(timeout=2.0):
                return

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        runner.answer(0, runner.layout(op), rows)
    assert engine.stopped.is_set() and engine.resumed
    assert engine.calls == 1  # the second batch, queued behind the first, never ran
    assert runner.cache.get_many(runner.prepare(runner.layout(op), rows).keys.values()) == {}
