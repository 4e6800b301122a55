"""Settings every layer shares, resolved in one place: the cache layout.

One cache root (`$QUAIL_CACHE_DIR`, else `~/.cache/quail`) with one folder per kind of entry,
whether or not the variable is set:

    <root>/models    converted model weights and tokenizers (one folder per source file)
    <root>/answers   the answer cache (SQLite)
    <root>/tokens    the token store (Arrow files of token ids by content hash)
    <root>/probe     the CPU probe's measured rates
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_KINDS = ("models", "answers", "tokens", "probe")


def cache_root() -> Path:
    """The cache root: `$QUAIL_CACHE_DIR` when set and non-empty, else `~/.cache/quail`."""
    return Path(os.environ.get("QUAIL_CACHE_DIR") or Path.home() / ".cache" / "quail")


def cache_path(kind: str) -> Path:
    """The folder of one kind of cache entry (not created here)."""
    if kind not in CACHE_KINDS:
        raise ValueError(f"unknown cache kind {kind!r}; expected one of {CACHE_KINDS}")
    return cache_root() / kind
