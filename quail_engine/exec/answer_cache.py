"""Answers stored by content - (model identity, rendered prompt, readout) - in a local SQLite file.

SQLite in WAL mode commits every batch, so answers computed before a crash, a SIGKILL or Ctrl-C
are kept and a re-run (or a dbt model over a grown table) computes only what is new; an
interrupted transaction is rolled back when the file is next opened. Processes sharing the file
write one short transaction at a time (each waits up to BUSY_TIMEOUT_S for another's). A cache
that cannot be opened or written (read-only, full, not a database) costs recomputation, never
the query: a warning, and the query runs without it.

A key begins with its document's digest, so one batch's answers (a join's rows over a few
anchors) share a few neighbouring pages of the key index rather than one random page each.
Files written before that (keys of the bare hash; the `meta` table says so) are still read:
a key missing under the new form is looked up under the old one.
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
    return AnswerKeys(identity, readout).key(prefix_digest, suffix)


class AnswerKeys:
    """`answer_key` for many answers of one readout: the hash of (identity, readout) taken once
    and, per document, once more with its digest; each answer then hashes its question alone
    (a join's 28,000 keys per chunk of anchors: the part of its preparation the device waits
    for or shares the host with)."""

    def __init__(self, identity: str, readout: str):
        h = hashlib.sha256()
        for part in (identity, readout):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        self._base = h
        self._docs: dict[bytes, tuple[str, object]] = {}

    def key(self, prefix_digest: bytes, suffix: str) -> str:
        doc = self._docs.get(prefix_digest)
        if doc is None:
            h = self._base.copy()
            h.update(prefix_digest)
            doc = self._docs[prefix_digest] = (prefix_digest[:DOC_BYTES].hex(), h)
        h = doc[1].copy()
        h.update(suffix.encode("utf-8", "surrogatepass"))
        # the document first: a batch's answers over a few documents land on a few index
        # pages (random keys rewrite a page of the index per answer)
        return doc[0] + h.hexdigest()


DOC_BYTES = 8  # of the document's digest at the start of a key (16 hex characters)
RANGE_MIN = 64  # keys of one document from which get_many reads its whole key range


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class AnswerCache:
    """get_many/put_many of JSON-able answer values by key. `path=None`: disabled."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.hits = 0
        self._lock = threading.Lock()
        self._con: sqlite3.Connection | None = None
        self._legacy = False
        if self.path is not None:
            try:
                self._con, self._legacy = self._connect(self.path)
            except (sqlite3.Error, OSError) as exc:
                self._give_up("cannot be opened", exc)

    @staticmethod
    def _connect(path: Path) -> tuple[sqlite3.Connection, bool]:
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
                # often
                con.execute("PRAGMA cache_size=-65536")
                con.execute("PRAGMA wal_autocheckpoint=10000")
                return con, AnswerCache._create(con)
            except sqlite3.OperationalError as exc:
                # two connections creating the file at once (dbt threads, two processes)
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    con.close()
                    raise
                time.sleep(0.05)
            except BaseException:
                con.close()
                raise

    @staticmethod
    def _create(con: sqlite3.Connection) -> bool:
        """The tables, if new; -> whether the file holds answers under the old keys."""
        con.execute("BEGIN IMMEDIATE")
        try:
            tables = {r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "meta" not in tables:
                con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                con.execute("INSERT INTO meta VALUES ('legacy_keys', ?)",
                            ("1" if "answers" in tables else "0",))
            con.execute("CREATE TABLE IF NOT EXISTS answers "
                        "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            legacy = con.execute("SELECT value FROM meta WHERE key = 'legacy_keys'").fetchone()
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        return legacy is not None and legacy[0] == "1"

    @classmethod
    def in_dir(cls, cache_dir: str | Path | None) -> AnswerCache:
        return cls(None if cache_dir is None else Path(cache_dir) / "answers.sqlite")

    def get_many(self, keys: Iterable[str]) -> dict[str, object]:
        keys = list(dict.fromkeys(keys))
        if self._con is None or not keys:
            return {}
        out: dict[str, object] = {}
        by_doc: dict[str, list[str]] = {}
        for k in keys:
            by_doc.setdefault(k[:2 * DOC_BYTES], []).append(k)
        wanted = set(keys)
        few: list[str] = []
        with self._lock:
            try:
                for doc, group in by_doc.items():
                    if len(group) < RANGE_MIN:
                        few += group
                        continue
                    # every answer stored under this document: one range of the key index, not
                    # one probe per key (a join chunk's 28,000 keys over ~25 anchors)
                    rows = self._con.execute(
                        "SELECT key, value FROM answers WHERE key >= ? AND key < ?",
                        (doc, doc + "\U0010ffff")).fetchall()  # (above any character's bytes)
                    out.update((k, json.loads(v)) for k, v in rows if k in wanted)
                for i in range(0, len(few), 500):
                    chunk = few[i:i + 500]
                    marks = ",".join("?" * len(chunk))
                    rows = self._con.execute(
                        f"SELECT key, value FROM answers WHERE key IN ({marks})",
                        chunk).fetchall()
                    out.update((k, json.loads(v)) for k, v in rows)
                if self._legacy:
                    self._get_legacy(keys, out)
            except (sqlite3.Error, ValueError) as exc:
                self._give_up("cannot be read", exc)
                return {}
        self.hits += len(out)
        return out

    def _get_legacy(self, keys: list[str], out: dict[str, object]) -> None:
        """Misses looked up under their key before the document prefix."""
        old = {k[2 * DOC_BYTES:]: k for k in keys
               if k not in out and len(k) == 2 * DOC_BYTES + 64}
        bare = list(old)
        for i in range(0, len(bare), 500):
            chunk = bare[i:i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._con.execute(f"SELECT key, value FROM answers WHERE key IN ({marks})",
                                     chunk).fetchall()
            out.update((old[k], json.loads(v)) for k, v in rows)

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
