"""Concurrent DuckDB calls of one AI function answered together.

DuckDB calls a function from each of its threads that holds rows: a grouped AI aggregate over
a CSV file, for instance, is finalized in one call per partition, a few groups each, from as
many threads at once. The engine answers one call at a time (the statement's lock), so asked
one by one they would run as that many small engine calls, each aggregate's map-reduce rounds
alone. Instead every call queues its rows, and whichever caller next holds the lock answers
all rows queued by then in one engine call (one map-reduce over every queued group); a caller
whose rows an earlier holder answered returns at once. Which calls share an engine call depends
on DuckDB's threads, as the rows of a DuckDB vector always have; the answers do not, where the
precision promises batch-invariant arithmetic (README, "What an answer depends on").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence


class _Call:
    __slots__ = ("rows", "answers", "error", "done")

    def __init__(self, rows: Sequence[tuple]):
        self.rows = rows
        self.answers: list[object] = []
        self.error: BaseException | None = None
        self.done = False


class GatheredCalls:
    """`answer(rows)` for rows of any number of concurrent callers: `ask(rows)` answers the
    distinct rows queued by every caller (one call), under `lock`, the lock the statement's
    engine work holds."""

    def __init__(self, ask: Callable[[list[tuple]], Sequence[object]], lock: threading.Lock):
        self._ask, self._lock = ask, lock
        self._queue: list[_Call] = []
        self._queued = threading.Lock()  # (held only to add to or take the queue)

    @property
    def pending(self) -> int:
        """Calls queued and not yet taken by an answering caller."""
        with self._queued:
            return len(self._queue)

    def answer(self, rows: Sequence[tuple]) -> list[object]:
        call = _Call(rows)
        with self._queued:
            self._queue.append(call)
        with self._lock:
            if not call.done:
                with self._queued:
                    batch, self._queue = self._queue, []
                self._answer(batch)
        if call.error is not None:
            raise call.error
        return call.answers

    def _answer(self, batch: list[_Call]) -> None:
        try:
            distinct = list(dict.fromkeys(r for c in batch for r in c.rows))
            got = dict(zip(distinct, self._ask(distinct), strict=True))
            answers = [[got[r] for r in c.rows] for c in batch]
        except BaseException as exc:  # noqa: BLE001 - each caller of the batch raises it
            for c in batch:  # (every call of the batch is done: none is left to ask again)
                c.error, c.done = exc, True
            return
        for c, a in zip(batch, answers):
            c.answers, c.done = a, True
