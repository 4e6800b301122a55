"""Where a GGUF file's conversion lives, and the lock its first uses take turns under, without
torch: exec/model_check asks whether a conversion is cached before converting in a child process,
infer/embedded reassembles the default model's parts under the same kind of lock, and
infer/gguf converts.

The conversion's folder is named by the file's content digest (infer/file_digest.py: the same
file reinstalled, in a new virtual environment or a copy, reuses its conversion; other bytes of
the same size never do) and by the versions of the libraries that convert it (the gguf reader
dequantizes the weights, the tokenizers library writes the tokenizer: another version's
conversion is its own, and the model's fingerprint checks it).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from quail_engine.infer.file_digest import content_digest
from quail_engine.settings import cache_path

try:
    import fcntl
except ImportError:  # Windows: the atomic rename alone keeps the cache consistent there
    fcntl = None

CACHE_FORMAT = 3  # bump when the converted layout changes, so old caches are not misread


def cache_root() -> Path:
    """The models cache: <cache root>/models, whether or not QUAIL_CACHE_DIR is set."""
    return cache_path("models")


def cache_dir_for(path: Path) -> Path:
    """The conversion's folder of the GGUF file `path` (above)."""
    size = path.stat().st_size
    key = hashlib.sha256(f"{content_digest(path)} {converter_versions()}".encode())
    return cache_root() / f"{path.stem}-{size}-{key.hexdigest()[:16]}-v{CACHE_FORMAT}"


def converter_versions() -> str:
    names = []
    for package in ("gguf", "tokenizers"):
        try:
            names.append(f"{package}=={version(package)}")
        except PackageNotFoundError:
            names.append(f"{package}=none")
    return " ".join(names)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on `path` (created), held for the block; a no-op where fcntl is
    missing."""
    if fcntl is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
