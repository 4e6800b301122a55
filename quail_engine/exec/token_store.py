"""TokenStore: token ids of every distinct text a query feeds the model, tokenized once.

Texts are keyed by a content hash (BLAKE2b-128 of the exact text encoded). Misses are tokenized
in one batched call per `ids` request (a fast tokenizer spreads a batch over the cores) and kept
in memory for the query; with a directory, new entries are also written as Arrow IPC segments
(`<dir>/<namespace>/seg-*.arrow`: `key` fixed_size_binary(16), `ids` list<int32>), each written
to a temporary name and renamed, so a crash never leaves a partial segment (a killed writer's
temporary file is removed by the next open). Later runs, other
predicates over the same column and incremental dbt models memory-map the segments and skip
tokenization. The namespace is the tokenizer's identity: ids of one tokenizer never serve another.
Processes sharing a directory only add files and never rewrite one; two that merge segments at
once leave duplicate entries, which are harmless.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

log = logging.getLogger(__name__)
SCHEMA = pa.schema([("key", pa.binary(16)), ("ids", pa.list_(pa.int32()))])
FLUSH_ENTRIES = 50_000  # write a segment when this many new entries are pending
MAX_SEGMENTS = 64       # more segments than this are merged into one at open


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class TokenStore:
    """`ids(texts)` -> token id lists (aligned with `texts`). `encode_batch` tokenizes misses;
    it is called only when some text is missing, so a warm store needs no tokenizer."""

    def __init__(self, encode_batch: Callable[[list[str]], list[list[int]]],
                 directory: str | Path | None = None):
        self._encode_batch = encode_batch
        self.directory = Path(directory) if directory is not None else None
        self._mem: dict[bytes, list[int]] = {}
        self._by_text: dict[str, list[int]] = {}  # this process's lookups, by the text itself
        self._disk: dict[bytes, tuple[int, int]] = {}
        self._segments: list[pa.ListArray] = []
        self._pending: dict[bytes, list[int]] = {}
        self.num_disk_hits = 0
        if self.directory is not None:
            self._open()

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        known = self._by_text
        if all(t in known for t in texts):  # the common case inside a query: no hashing
            return [known[t] for t in texts]
        keys = [text_key(t) for t in texts]
        missing: dict[bytes, str] = {}
        for k, t in zip(keys, texts):
            if k not in self._mem and k not in missing and not self._load(k):
                missing[k] = t
        if missing:
            encoded = self._encode_batch(list(missing.values()))
            for k, ids in zip(missing, encoded):
                self._mem[k] = list(ids)
                if self.directory is not None:
                    self._pending[k] = self._mem[k]
            if len(self._pending) >= FLUSH_ENTRIES:
                self.flush()
        out = [self._mem[k] for k in keys]
        for t, ids in zip(texts, out):
            known[t] = ids
        return out

    def _load(self, key: bytes) -> bool:
        where = self._disk.get(key)
        if where is None:
            return False
        seg, row = where
        self._mem[key] = self._segments[seg][row].values.to_numpy(zero_copy_only=False).tolist()
        self.num_disk_hits += 1
        return True

    def flush(self) -> None:
        """Write pending entries as one new segment (atomically); no-op without a directory."""
        if self.directory is None or not self._pending:
            return
        table = pa.table([pa.array(list(self._pending), pa.binary(16)),
                          pa.array(list(self._pending.values()), pa.list_(pa.int32()))],
                         schema=SCHEMA)
        try:
            self._write(table)
        except OSError as exc:  # a full or read-only cache only costs re-tokenizing later
            log.warning("token store %s not written: %s", self.directory, exc)
        self._pending = {}

    def _write(self, table: pa.Table) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"seg-{uuid.uuid4().hex}.arrow"
        tmp = self.directory / f".{name}.{os.getpid()}.tmp"
        try:
            with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
                writer.write_table(table)
            os.replace(tmp, self.directory / name)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return self.directory / name

    def _open(self) -> None:
        if not self.directory.is_dir():
            return
        self._remove_stale_temps()
        tables = []
        for path in sorted(self.directory.glob("seg-*.arrow")):
            try:
                reader = pa.ipc.open_file(pa.memory_map(str(path), "r"))
                tables.append((path, reader.read_all()))
            except FileNotFoundError:  # merged into another segment by a concurrent open
                continue
            except (OSError, pa.ArrowInvalid) as exc:
                log.warning("ignoring unreadable token segment %s: %s", path, exc)
        if len(tables) > MAX_SEGMENTS:
            tables = self._compact(tables)
        for _, table in tables:
            seg = len(self._segments)
            self._segments.append(table.column("ids").combine_chunks())
            for row, key in enumerate(table.column("key").to_pylist()):
                self._disk[key] = (seg, row)

    def _remove_stale_temps(self) -> None:
        """Temporary segments of writers that died before renaming them (`.<name>.<pid>.tmp`)."""
        for tmp in self.directory.glob(".seg-*.tmp"):
            pid = tmp.name.rsplit(".", 2)[-2]
            if pid.isdigit() and not _is_running(int(pid)):
                tmp.unlink(missing_ok=True)

    def _compact(self, tables: list[tuple[Path, pa.Table]]) -> list[tuple[Path, pa.Table]]:
        merged = pa.concat_tables([t for _, t in tables])
        try:
            path = self._write(merged)
        except OSError as exc:
            log.warning("token store %s not compacted: %s", self.directory, exc)
            return tables
        for old, _ in tables:
            old.unlink(missing_ok=True)
        return [(path, merged)]


def _is_running(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate it there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: running, as another user
        return True
    return True
