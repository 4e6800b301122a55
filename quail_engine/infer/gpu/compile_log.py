"""Triton kernel compilations, counted and logged, and kept under the quail cache root. The
engine's warm-up compiles the variants a query needs while the model loads; a compilation
later, inside a query, costs that query its seconds and names a variant the warm-up missed
(`totals()` before and after a query says how many and how long).

Triton keeps what it compiled in its cache directory and loads it from there next time
(milliseconds, not seconds a kernel). `use_cache_dir()` points that directory at the quail cache
root's `kernels/` (settings.cache_path) unless TRITON_CACHE_DIR is set, so `quail warmup` (or a
first query) fills it once per machine and later processes load instead of compiling; the folder
can be copied to another machine of the same GPU, Triton and CUDA (Triton's cache keys hold
them)."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from quail_engine.settings import cache_path

log = logging.getLogger(__name__)
_lock = threading.Lock()
_compiles, _seconds = 0, 0.0
_installed = False


def use_cache_dir() -> Path:
    """Triton's cache directory: $TRITON_CACHE_DIR when set, else set to the quail cache root's
    `kernels/` (before the first compilation: Triton reads it at each one)."""
    if not os.environ.get("TRITON_CACHE_DIR"):
        os.environ["TRITON_CACHE_DIR"] = str(cache_path("kernels"))
    return Path(os.environ["TRITON_CACHE_DIR"])


def cache_inventory(directory: Path | None = None) -> dict:
    """What a Triton cache directory holds: its path, compiled kernels (one folder per
    variant) and bytes; zeros for a missing one."""
    directory = Path(directory or use_cache_dir())
    kernels = nbytes = 0
    if directory.is_dir():
        for entry in directory.iterdir():
            if entry.is_dir():
                kernels += 1
                nbytes += sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
    return {"dir": str(directory), "kernels": kernels, "bytes": nbytes}


def install() -> None:
    """Keep compiled kernels under the quail cache root (`use_cache_dir`) and listen to
    Triton's compiler (knobs.compilation.listener, Triton >= 3.4); the listener is skipped where
    that hook is missing or another listener holds it."""
    global _installed
    if _installed:
        return
    use_cache_dir()
    try:
        from triton import knobs  # (deferred: triton, absent off the GPU; CLI start)
        if knobs.compilation.listener not in (None, _listener):
            return
        knobs.compilation.listener = _listener
    except (ImportError, AttributeError):
        return
    _installed = True


def _listener(*, src, metadata=None, metadata_group=None, times=None, cache_hit=False,
              **_) -> None:
    global _compiles, _seconds
    seconds = (getattr(times, "total", 0) or 0) / 1e6
    with _lock:
        _compiles += 1
        _seconds += seconds
    name = getattr(src, "name", None) or type(src).__name__
    names = getattr(getattr(src, "fn", None), "arg_names", None) or []
    constants = {}
    for key, value in (getattr(src, "constants", None) or {}).items():
        if isinstance(key, tuple) and len(key) == 1 and key[0] < len(names):
            key = names[key[0]]
        constants[key] = value
    log.info("Triton %s %s in %.2f s: %s%s", "loaded" if cache_hit else "compiled", name,
             seconds, str(constants)[:400], _specialized(src, names))


def _specialized(src, names: list[str]) -> str:
    """The arguments the variant assumes divisible by 16 (Triton's specialization of pointers
    and integers, besides the == 1 ones among the constants): two variants with the same
    constants differ here."""
    div16 = []
    try:  # (a log line: another Triton's form of `attrs` must not fail the compilation)
        for key, values in (getattr(src, "attrs", None) or {}).items():
            index = key[0] if isinstance(key, tuple) and len(key) == 1 else None
            if any(list(v)[:1] == ["tt.divisibility"] and list(v)[1:] == [16] for v in values):
                div16.append(names[index] if index is not None and index < len(names)
                             else str(key))
    except (AttributeError, TypeError):
        return ""
    return f"; divisible by 16: {', '.join(div16)}" if div16 else ""


def totals() -> tuple[int, float]:
    """(compilations and cache loads so far, their seconds)."""
    with _lock:
        return _compiles, _seconds
