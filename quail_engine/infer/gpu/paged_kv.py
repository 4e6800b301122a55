"""Paged KV arena on the GPU: fixed-size pages of keys and values for every layer, handed out
from a free list, with explicit retain/release per resident prefix.

k, v: [num_layers, num_pages, page_size, num_kv_heads, head_dim]. A prefix owns a list of
pages (its block table row); token i of the prefix lives in page pages[i // page_size] at slot
i % page_size. Pages return to the free list when the last holder releases the prefix (or,
as a safety net, when the PagedPrefix object is garbage-collected).
"""

from __future__ import annotations

import logging
import weakref

import torch

from quail_engine.errors import ExecutionError

log = logging.getLogger(__name__)


class PagedPrefix:
    """A resident prefix: `num_tokens` tokens in `pages` of `arena`; `refs` holders."""

    def __init__(self, arena: PagedKVArena, pages: list[int], num_tokens: int):
        self.arena = arena
        self.pages = pages
        self.num_tokens = num_tokens
        self.refs = 1
        self._finalizer = weakref.finalize(self, arena.free_pages, list(pages))

    @property
    def nbytes(self) -> int:
        return len(self.pages) * self.arena.page_bytes

    def retain(self) -> None:
        if self.refs <= 0:
            raise ExecutionError(f"retain of a released prefix ({self.num_tokens} tokens)")
        self.refs += 1

    def release(self) -> bool:
        """Drop one holder; True when this freed the pages."""
        if self.refs <= 0:
            raise ExecutionError(f"release of a released prefix ({self.num_tokens} tokens)")
        self.refs -= 1
        if self.refs == 0:
            self._finalizer()
            return True
        return False

    def slots(self) -> torch.Tensor:
        """[num_tokens] flat slot index (page * page_size + offset) of every token."""
        size = self.arena.page_size
        pages = torch.tensor(self.pages, dtype=torch.long).repeat_interleave(size)
        offsets = torch.arange(size).repeat(len(self.pages))
        return (pages * size + offsets)[: self.num_tokens]

    def concat(self, other: PagedPrefix) -> PagedPrefix:
        """A new prefix holding this one's tokens followed by `other`'s (copied)."""
        joined = self.arena.allocate(self.num_tokens + other.num_tokens)
        dst = joined.slots().to(self.arena.device)
        src = torch.cat([self.slots(), other.slots()]).to(self.arena.device)
        for cache in (self.arena.k, self.arena.v):
            flat = cache.flatten(1, 2)
            flat[:, dst] = flat[:, src]
        return joined


class PagedKVArena:
    def __init__(self, num_layers: int, num_kv_heads: int, head_dim: int, num_pages: int,
                 page_size: int = 64, dtype: torch.dtype = torch.bfloat16,
                 device: torch.device | str = "cuda"):
        if page_size <= 0 or page_size & (page_size - 1):
            raise ValueError(f"page_size must be a power of two, got {page_size}")
        shape = (num_layers, num_pages, page_size, num_kv_heads, head_dim)
        self.device = torch.device(device)
        self.k = torch.empty(shape, dtype=dtype, device=self.device)
        self.v = torch.empty(shape, dtype=dtype, device=self.device)
        self.page_size = page_size
        self.num_pages = num_pages
        self.page_bytes = 2 * num_layers * page_size * num_kv_heads * head_dim * self.k.element_size()
        self._free = list(range(num_pages - 1, -1, -1))

    @classmethod
    def for_budget(cls, num_layers: int, num_kv_heads: int, head_dim: int, budget_bytes: int,
                   page_size: int = 64, dtype: torch.dtype = torch.bfloat16,
                   device: torch.device | str = "cuda") -> PagedKVArena:
        page_bytes = 2 * num_layers * page_size * num_kv_heads * head_dim * dtype.itemsize
        num_pages = max(1, budget_bytes // page_bytes)
        return cls(num_layers, num_kv_heads, head_dim, num_pages, page_size, dtype, device)

    @property
    def num_free_pages(self) -> int:
        return len(self._free)

    def allocate(self, num_tokens: int) -> PagedPrefix:
        need = -(-num_tokens // self.page_size)
        if need > len(self._free):
            raise ExecutionError(
                f"KV arena full: {num_tokens} tokens need {need} pages, {len(self._free)} free "
                f"of {self.num_pages}; release prefixes or give the arena more memory")
        pages = [self._free.pop() for _ in range(need)]
        return PagedPrefix(self, pages, num_tokens)

    def free_pages(self, pages: list[int]) -> None:
        self._free.extend(reversed(pages))
        log.debug("freed %d pages (%d free)", len(pages), len(self._free))
