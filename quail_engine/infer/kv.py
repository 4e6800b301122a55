"""KV arena: the resident prefix KV entries, with explicit reference counts and byte accounting.

The planner decides when a cached document will not be read again; the arena only counts.
`add` stores an entry with one reference, `retain` adds one, `release` drops one and frees the
entry on the last release. The payload is opaque here (the engine stores a model `PrefixKV`), so
this module imports no torch and tests anywhere.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from quail_engine.errors import ExecutionError

log = logging.getLogger(__name__)


@dataclass
class KVEntry:
    id: int
    payload: Any
    num_tokens: int
    nbytes: int
    refcount: int = 1


class KVArena:
    """Reference-counted store of prefix KV entries.

    `capacity_bytes` (None = unbounded) is a hard limit: an `add` past it raises ExecutionError
    naming the sizes, because silently evicting an entry a request will read would be wrong.
    """

    def __init__(self, capacity_bytes: int | None = None):
        self.capacity_bytes = capacity_bytes
        self._entries: dict[int, KVEntry] = {}
        self._next_id = 1
        self.bytes_in_use = 0
        self.peak_bytes = 0
        self.num_added = 0
        self.num_freed = 0

    def add(self, payload: Any, num_tokens: int, nbytes: int) -> int:
        """Store `payload` with one reference; returns its id."""
        if nbytes < 0 or num_tokens < 0:
            raise ValueError(f"KV entry sizes must be >= 0, got {num_tokens} tokens, {nbytes} bytes")
        if self.capacity_bytes is not None and self.bytes_in_use + nbytes > self.capacity_bytes:
            raise ExecutionError(
                f"KV arena full: {self.bytes_in_use} bytes in use + {nbytes} requested "
                f"> capacity {self.capacity_bytes}; release prefixes that will not be read again")
        entry_id = self._next_id
        self._next_id += 1
        self._entries[entry_id] = KVEntry(entry_id, payload, num_tokens, nbytes)
        self.bytes_in_use += nbytes
        self.peak_bytes = max(self.peak_bytes, self.bytes_in_use)
        self.num_added += 1
        return entry_id

    def retain(self, entry_id: int) -> None:
        self._entry(entry_id).refcount += 1

    def release(self, entry_id: int) -> bool:
        """Drop one reference; frees the entry on the last one. Returns True when freed."""
        entry = self._entry(entry_id)
        entry.refcount -= 1
        if entry.refcount > 0:
            return False
        del self._entries[entry_id]
        self.bytes_in_use -= entry.nbytes
        self.num_freed += 1
        log.debug("freed KV entry %d (%d tokens, %d bytes)", entry_id, entry.num_tokens,
                  entry.nbytes)
        return True

    def get(self, entry_id: int) -> Any:
        return self._entry(entry_id).payload

    def refcount(self, entry_id: int) -> int:
        return self._entry(entry_id).refcount

    def has(self, entry_id: int) -> bool:
        return entry_id in self._entries

    @property
    def num_entries(self) -> int:
        return len(self._entries)

    def _entry(self, entry_id: int) -> KVEntry:
        try:
            return self._entries[entry_id]
        except KeyError:
            raise ExecutionError(
                f"KV entry {entry_id} is not resident (released already, or never added)"
            ) from None
