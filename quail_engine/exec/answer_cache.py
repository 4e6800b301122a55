"""Answers stored by content - (model identity, rendered prompt, readout) - in a local SQLite file.

SQLite in WAL mode commits every batch, so answers computed before a crash, a SIGKILL or Ctrl-C
are kept and a re-run (or a dbt model over a grown table) computes only what is new; an
interrupted transaction is rolled back when the file is next opened. Processes sharing the file
write one short transaction at a time (each waits up to BUSY_TIMEOUT_S for another's). A cache
that cannot be opened or written (read-only, full, not a database) costs recomputation, never
the query: a warning, and the query runs without it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)
BUSY_TIMEOUT_S = 60.0


def answer_key(identity: str, readout: str, prefix_digest: bytes, suffix: str) -> str:
    """Key of one answer: the model's identity, the readout (with its calibration and
    precision), the document part of the prompt by its digest (`text_digest`, computed once per
    distinct document, so a join does not hash its anchor once per partner) and the question."""
    h = hashlib.sha256()
    for part in (identity, readout):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    h.update(prefix_digest)
    h.update(suffix.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class AnswerCache:
    """get_many/put_many of JSON-able answer values by key. `path=None`: disabled."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.hits = 0
        self._lock = threading.Lock()
        self._con: sqlite3.Connection | None = None
        if self.path is not None:
            try:
                self._con = self._connect(self.path)
            except (sqlite3.Error, OSError) as exc:
                self._give_up("cannot be opened", exc)

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, check_same_thread=False,
                              isolation_level=None)
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                # WAL is a property of the file: switch once (the switch needs the file to
                # itself, and SQLite does not wait for it), then only read the mode
                if con.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=NORMAL")  # in WAL: durable across crashes
                # a batch's answers land on random pages of the key index: a 64 MiB page cache
                # and a checkpoint every 10,000 WAL pages (not 1,000) rewrite each page less
                # often (1,500-answer commits: 53 -> 30 us an answer on a 2-core machine)
                con.execute("PRAGMA cache_size=-65536")
                con.execute("PRAGMA wal_autocheckpoint=10000")
                con.execute("CREATE TABLE IF NOT EXISTS answers "
                            "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                return con
            except sqlite3.OperationalError as exc:
                # two connections creating the file at once (dbt threads, two processes)
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    con.close()
                    raise
                time.sleep(0.05)
            except BaseException:
                con.close()
                raise

    @classmethod
    def in_dir(cls, cache_dir: str | Path | None) -> AnswerCache:
        return cls(None if cache_dir is None else Path(cache_dir) / "answers.sqlite")

    def get_many(self, keys: Iterable[str]) -> dict[str, object]:
        keys = list(dict.fromkeys(keys))
        if self._con is None or not keys:
            return {}
        out: dict[str, object] = {}
        with self._lock:
            try:
                for i in range(0, len(keys), 500):
                    chunk = keys[i:i + 500]
                    marks = ",".join("?" * len(chunk))
                    rows = self._con.execute(
                        f"SELECT key, value FROM answers WHERE key IN ({marks})",
                        chunk).fetchall()
                    out.update((k, json.loads(v)) for k, v in rows)
            except (sqlite3.Error, ValueError) as exc:
                self._give_up("cannot be read", exc)
                return {}
        self.hits += len(out)
        return out

    def put_many(self, items: dict[str, object]) -> None:
        if self._con is None or not items:
            return
        rows = [(k, json.dumps(v)) for k, v in items.items()]
        with self._lock:
            try:
                self._con.execute("BEGIN IMMEDIATE")  # the write lock now, not at the insert
                try:
                    self._con.executemany("INSERT OR REPLACE INTO answers VALUES (?, ?)", rows)
                    self._con.execute("COMMIT")
                except BaseException:
                    if self._con.in_transaction:
                        self._con.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                self._give_up("cannot be written", exc)

    def _give_up(self, what: str, exc: Exception) -> None:
        log.warning("answer cache %s %s (%s); answers of this run are not cached", self.path,
                    what, exc)
        self.close()

    def close(self) -> None:
        if self._con is not None:
            try:
                self._con.close()
            except sqlite3.Error:
                pass
            self._con = None
