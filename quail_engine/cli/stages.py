"""Stage messages and log lines on the terminal while a query runs.

Lower layers log stage messages (converting and loading the model, the CPU probe) on the logger
`quail_engine.stage`; `show_stages` routes them into the open progress display (or a plain
line on stderr) and makes the CLI's log handler write above a live progress bar rather than
through it. Progress displays (cli/progress.py) `register` while open and `unregister` when
closed; `active()` is the one stage messages go to.
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref

from quail_engine.exec.facade import STAGE_LOGGER, route_stages

_ACTIVE: list[weakref.ref] = []
_ACTIVE_LOCK = threading.Lock()


def register(progress) -> None:
    with _ACTIVE_LOCK:
        _ACTIVE.append(weakref.ref(progress))


def unregister(progress) -> None:
    with _ACTIVE_LOCK:
        _ACTIVE[:] = [r for r in _ACTIVE if r() is not None and r() is not progress]


def active():
    """The most recently opened progress display that is not closed yet."""
    with _ACTIVE_LOCK:
        for ref in reversed(_ACTIVE):
            progress = ref()
            if progress is not None:
                return progress
    return None


def show_stages(quiet: bool) -> None:
    """Stage messages show in the progress display on stderr, with or without -v; `quiet`
    silences them. Log lines go above a live progress bar."""
    route_stages(None if quiet else show_stage)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
            handler.setStream(StderrAboveBar())
            if not quiet:  # shown once, by the progress display
                handler.addFilter(lambda record: record.name != STAGE_LOGGER)


def show_stage(text: str) -> None:
    """A stage message for the person at the terminal: into the open display, else a line."""
    progress = active()
    if progress is not None:
        progress.stage(text)
        return
    try:
        sys.stderr.write(f"quail: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class StderrAboveBar:
    """stderr for log handlers (warnings, -v): each line goes above the open display's live
    bar, instead of through it."""

    def write(self, text: str) -> None:
        progress = active()
        if progress is not None and progress.mode == "bar":
            progress.print_above(text)
        else:
            sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()
