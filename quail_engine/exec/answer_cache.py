"""Answers stored by content - (model identity, rendered prompt, readout) - in a local SQLite file.

SQLite in WAL mode commits every batch, so answers computed before a crash or Ctrl-C are kept and
a re-run (or a dbt model over a grown table) computes only what is new.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)


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
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._con = sqlite3.connect(str(self.path), check_same_thread=False,
                                        isolation_level=None)
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute("PRAGMA synchronous=NORMAL")
            self._con.execute("CREATE TABLE IF NOT EXISTS answers "
                              "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    @classmethod
    def in_dir(cls, cache_dir: str | Path | None) -> AnswerCache:
        return cls(None if cache_dir is None else Path(cache_dir) / "answers.sqlite")

    @property
    def is_enabled(self) -> bool:
        return self._con is not None

    def get_many(self, keys: Iterable[str]) -> dict[str, object]:
        keys = list(dict.fromkeys(keys))
        if self._con is None or not keys:
            return {}
        out: dict[str, object] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._con.execute(
                    f"SELECT key, value FROM answers WHERE key IN ({marks})", chunk).fetchall()
                out.update((k, json.loads(v)) for k, v in rows)
        self.hits += len(out)
        return out

    def put_many(self, items: dict[str, object]) -> None:
        if self._con is None or not items:
            return
        with self._lock:
            self._con.execute("BEGIN")
            self._con.executemany("INSERT OR REPLACE INTO answers VALUES (?, ?)",
                                  [(k, json.dumps(v)) for k, v in items.items()])
            self._con.execute("COMMIT")

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
