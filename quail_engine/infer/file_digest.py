"""Content digests of model files, hashed once per change of the file.

A model's identity (infer/model_ref.py) keys every cached answer and token id, so it must change
whenever a weight file's bytes do. Name, size and modification time do not suffice: a file
replaced by other weights of the same size, with its old modification time set back, kept its
identity and the cache served the old model's answers. The digest here is the SHA-256 of the
bytes, remembered under the cache's `digests` folder with the file's size, modification and
inode-change times, inode and device: setting the modification time back changes the
inode-change time (no user call sets that), and replacing the file changes the inode, so a
remembered digest is used only for the very file it was computed from. Hashing reads the file
once (a GB takes about a second); where the cache cannot be written the digest is computed
again each time.

A model's identity reads every weight file before its first query on a machine, so there the
file is hashed in pieces on several threads (`piece_digest`: the SHA-256 of the pieces'
SHA-256s), a multi-gigabyte file in the time its bytes take to read rather than in SHA-256's
single-stream rate; `content_digest` stays the plain SHA-256 that published checksums (a
GGUF's) are compared with.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

from quail_engine.settings import cache_path

log = logging.getLogger(__name__)
CHUNK = 1 << 22


PIECE = 1 << 26  # piece_digest's piece: 64 MiB


def content_digest(path: str | Path) -> str:
    """The SHA-256 (hex) of the bytes of `path`."""
    return _remembered(path, "sha256", _sha256)


def piece_digest(path: str | Path) -> str:
    """The SHA-256 (hex) of the concatenated SHA-256 digests of `path`'s PIECE-byte pieces,
    hashed on several threads (hashlib and file reads release the GIL)."""
    return _remembered(path, f"sha256-of-{PIECE}-byte-pieces", _pieces)


def _remembered(path: str | Path, algorithm: str, compute) -> str:
    path = Path(path).resolve()
    stat = path.stat()
    key = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]
    record = _record_path(path, algorithm)
    try:
        kept = json.loads(record.read_text())
        if kept.get("path") == str(path) and kept.get("stat") == key:
            return kept[algorithm]
    except (OSError, ValueError, KeyError, AttributeError):
        pass  # none yet, or unreadable: hash the file
    value = compute(path)
    _remember(record, {"path": str(path), "stat": key, algorithm: value})
    return value


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _pieces(path: Path) -> str:
    from concurrent.futures import ThreadPoolExecutor  # (deferred: ~1 ms off the CLI's start)

    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        def piece(start: int) -> bytes:
            digest = hashlib.sha256()
            end = min(start + PIECE, size)
            while start < end:
                chunk = os.pread(fd, min(CHUNK, end - start), start)
                if not chunk:
                    raise OSError(f"{path} shrank while it was hashed")
                digest.update(chunk)
                start += len(chunk)
            return digest.digest()

        starts = range(0, max(size, 1), PIECE)
        with ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1, len(starts)))) as pool:
            return hashlib.sha256(b"".join(pool.map(piece, starts))).hexdigest()
    finally:
        os.close(fd)


def _record_path(path: Path, algorithm: str = "sha256") -> Path:
    # (plain SHA-256 records keep the names they had before piece digests existed)
    name = str(path) if algorithm == "sha256" else f"{algorithm} {path}"
    return cache_path("digests") / (hashlib.sha256(name.encode()).hexdigest()[:32] + ".json")


def _remember(record: Path, value: dict) -> None:
    """Write `record` whole or not at all (a rename), never failing the caller."""
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".digest-", dir=record.parent)
    except OSError as exc:
        log.debug("cannot remember the digest in %s (%s)", record, exc)
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, record)
    except OSError as exc:
        log.debug("cannot remember the digest in %s (%s)", record, exc)
        Path(tmp).unlink(missing_ok=True)
