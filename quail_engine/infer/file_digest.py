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


def content_digest(path: str | Path) -> str:
    """The SHA-256 (hex) of the bytes of `path`."""
    path = Path(path).resolve()
    stat = path.stat()
    key = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]
    record = _record_path(path)
    try:
        kept = json.loads(record.read_text())
        if kept.get("path") == str(path) and kept.get("stat") == key:
            return kept["sha256"]
    except (OSError, ValueError, KeyError, AttributeError):
        pass  # none yet, or unreadable: hash the file
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    value = digest.hexdigest()
    _remember(record, {"path": str(path), "stat": key, "sha256": value})
    return value


def _record_path(path: Path) -> Path:
    return cache_path("digests") / (hashlib.sha256(str(path).encode()).hexdigest()[:32] + ".json")


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
