"""Triton kernel compilations, counted and logged. The engine's warm-up compiles the variants a
query needs while the model loads; a compilation later, inside a query, costs that query its
seconds and names a variant the warm-up missed (`totals()` before and after a query says how
many and how long)."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)
_lock = threading.Lock()
_compiles, _seconds = 0, 0.0
_installed = False


def install() -> None:
    """Listen to Triton's compiler (knobs.compilation.listener, Triton >= 3.4); a no-op where
    that hook is missing or another listener holds it."""
    global _installed
    if _installed:
        return
    try:
        from triton import knobs
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
