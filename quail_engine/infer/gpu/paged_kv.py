"""Paged KV arena on the GPU: fixed-size pages of keys and values for every layer, handed out
from a free list, with explicit retain/release per resident prefix.

k, v: [num_layers, num_pages, page_size, num_kv_heads, head_dim]. A prefix holds a list of
pages (its block table row); token i of the prefix lives in page pages[i // page_size] at slot
i % page_size. Pages are reference counted: prefixes that begin alike hold the same pages (a
chain from the radix index, infer/prefix_cache.py, which holds them too), and a page returns
to the free list when its last holder lets go (a prefix's last release or, as a safety net,
its garbage collection; the index's eviction). An allocation short of free pages first asks
`reclaim` (the index's LRU eviction of pages no one pins) for room.

`kv_fp8`: K and V held as e4m3 with one float32 scale per (token, KV head) in `k_scale` /
`v_scale` [num_layers, num_pages, num_kv_heads, page_size] (quail_kernels/kv_fp8.py),
quantized as they are stored and dequantized by the kernels that read the pages: about half
the bytes a decode step reads per token, and about twice the tokens in the same memory
(`page_bytes` counts the scales).
"""

from __future__ import annotations

import logging
import weakref

import torch

from quail_engine.errors import ExecutionError
from quail_engine.infer.gpu.staging import to_device
from quail_kernels.kv_fp8 import KV_FP8
from quail_kernels.kv_store_fp8 import kv_store_fp8, kv_store_fp8_ref

log = logging.getLogger(__name__)


class PagedPrefix:
    """A resident prefix: `num_tokens` tokens in `pages` of `arena`; `refs` holders."""

    def __init__(self, arena: PagedKVArena, pages: list[int], num_tokens: int):
        self.arena = arena
        self.pages = list(pages)
        self.num_tokens = num_tokens
        self.refs = 1
        # over the live list: a decoding sequence's prefix grows in place (PagedKVArena.grow)
        self._finalizer = weakref.finalize(self, arena.free_pages, self.pages)

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

    def slots(self, start: int = 0) -> torch.Tensor:
        """[num_tokens - start] flat slot index (page * page_size + offset) of every token
        from `start` on (an extension copies only the last partial page: no index of the pages
        before it is built)."""
        size = self.arena.page_size
        first = start // size
        pages = torch.tensor(self.pages[first:], dtype=torch.long)
        rows = torch.arange(start - first * size, self.num_tokens - first * size)
        return pages[rows // size] * size + rows % size


def page_bytes_for(num_layers: int, num_kv_heads: int, head_dim: int, page_size: int,
                   dtype: torch.dtype, kv_fp8: bool = False) -> int:
    """Bytes of one page of K and V over all layers (with an fp8 arena's scales)."""
    per_head = head_dim * (1 if kv_fp8 else dtype.itemsize) + (4 if kv_fp8 else 0)
    return 2 * num_layers * page_size * num_kv_heads * per_head


class PagedKVArena:
    def __init__(self, num_layers: int, num_kv_heads: int, head_dim: int, num_pages: int,
                 page_size: int = 64, dtype: torch.dtype = torch.bfloat16,
                 device: torch.device | str = "cuda", kv_fp8: bool = False):
        if page_size <= 0 or page_size & (page_size - 1):
            raise ValueError(f"page_size must be a power of two, got {page_size}")
        shape = (num_layers, num_pages, page_size, num_kv_heads, head_dim)
        self.device = torch.device(device)
        self.is_fp8 = kv_fp8
        self.k = torch.empty(shape, dtype=KV_FP8 if kv_fp8 else dtype, device=self.device)
        self.v = torch.empty_like(self.k)
        scale_shape = (num_layers, num_pages, num_kv_heads, page_size)  # (kv_fp8.scales_by_head)
        self.k_scale = torch.empty(scale_shape, device=self.device) if kv_fp8 else None
        self.v_scale = torch.empty(scale_shape, device=self.device) if kv_fp8 else None
        self.page_size = page_size
        self.num_pages = num_pages
        self.page_bytes = page_bytes_for(num_layers, num_kv_heads, head_dim, page_size, dtype,
                                         kv_fp8)
        self._free = list(range(num_pages - 1, -1, -1))
        self._refs = [0] * num_pages
        self.reclaim = None  # callable(num_pages) -> pages it let go of, or None

    @classmethod
    def for_budget(cls, num_layers: int, num_kv_heads: int, head_dim: int, budget_bytes: int,
                   page_size: int = 64, dtype: torch.dtype = torch.bfloat16,
                   device: torch.device | str = "cuda", kv_fp8: bool = False) -> PagedKVArena:
        page_bytes = page_bytes_for(num_layers, num_kv_heads, head_dim, page_size, dtype,
                                    kv_fp8)
        num_pages = max(1, budget_bytes // page_bytes)
        return cls(num_layers, num_kv_heads, head_dim, num_pages, page_size, dtype, device,
                   kv_fp8)

    def store(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write k, v [N, Hkv, D] of one layer at flat slots [N] (page * page_size + offset),
        quantized first in an fp8 arena: one Triton launch on a GPU (in torch, a dozen small
        kernels a layer, which every decode step would pay), the torch reference elsewhere
        (the Triton interpreter's float -> fp8 cast can halve a value rounding up onto a power
        of two)."""
        if not self.is_fp8:
            self.k[layer].flatten(0, 1)[slots] = k
            self.v[layer].flatten(0, 1)[slots] = v
            return
        pages = (self.k[layer].flatten(0, 1), self.v[layer].flatten(0, 1), self.k_scale[layer],
                 self.v_scale[layer])
        store = kv_store_fp8 if self.device.type == "cuda" else kv_store_fp8_ref
        store(k, v, slots, *pages)

    def layer(self, layer: int) -> tuple[torch.Tensor, ...]:
        """One layer's pages for the attention kernels: (k, v) [P, PAGE, Hkv, D], and in an fp8
        arena their scales (k_scale, v_scale) [P, Hkv, PAGE] after them."""
        if not self.is_fp8:
            return self.k[layer], self.v[layer]
        return self.k[layer], self.v[layer], self.k_scale[layer], self.v_scale[layer]

    @property
    def num_free_pages(self) -> int:
        return len(self._free)

    def allocate(self, num_tokens: int) -> PagedPrefix:
        need = -(-num_tokens // self.page_size)
        while need > len(self._free) and self.reclaim is not None:
            if not self.reclaim(need - len(self._free)):
                break
        if need > len(self._free):
            raise ExecutionError(
                f"KV arena full: {num_tokens} tokens need {need} pages, {len(self._free)} free "
                f"of {self.num_pages}; release prefixes or give the arena more memory")
        pages = [self._free.pop() for _ in range(need)]
        for page in pages:
            self._refs[page] = 1
        return PagedPrefix(self, pages, num_tokens)

    def chain(self, pages: list[int], num_tokens: int) -> PagedPrefix:
        """A prefix over existing `pages` (one more holder each), e.g. a radix chain."""
        if -(-num_tokens // self.page_size) != len(pages):
            raise ValueError(f"{num_tokens} tokens do not fill {len(pages)} pages")
        self.hold_pages(pages)
        return PagedPrefix(self, list(pages), num_tokens)

    def extend(self, items: list[tuple[PagedPrefix | None, int]]
               ) -> list[tuple[PagedPrefix, torch.Tensor]]:
        """For each (prefix or None, n): a new prefix of the prefix's tokens followed by n more,
        and the flat slots [n] where a pass writes those n tokens' K/V. The prefix's whole
        pages are shared; the tokens of its partial last page, if any, are copied into the first
        new page and the n tokens follow them there, all prefixes' partial pages in one copy per
        cache. So a pass stores a sequence's KV where it will stay: a question stem after each
        of a join's anchor documents, or a row after a beginning shared to the token, copies at
        most a page per sequence, never its own tokens."""
        size = self.page_size
        out: list[tuple[PagedPrefix, torch.Tensor]] = []
        src: list[torch.Tensor] = []
        dst: list[torch.Tensor] = []
        partial: dict[int, torch.Tensor] = {}  # (a join's paths extend one anchor many times)
        for prefix, n in items:
            if prefix is None or prefix.num_tokens == 0:
                entry = self.allocate(n)
                out.append((entry, entry.slots()))
                continue
            whole = prefix.num_tokens // size
            part = prefix.num_tokens - whole * size
            fresh = self.allocate(part + n)
            slots = fresh.slots()
            if part:
                if id(prefix) not in partial:
                    partial[id(prefix)] = prefix.slots(whole * size)
                src.append(partial[id(prefix)])
                dst.append(slots[:part])
            out.append((self.chain(prefix.pages[:whole] + fresh.pages, prefix.num_tokens + n),
                        slots[part:]))
            fresh.release()  # (its pages stay, held by the new prefix)
        self._copy(src, dst)
        return out

    def grow(self, prefixes: list[PagedPrefix]) -> list[int]:
        """Make room for one more token at the end of each prefix, in place, and return each
        new token's flat slot (page * page_size + offset). A decode step writes its token's K/V
        there and attends over the grown prefix, so a sequence's KV is neither copied nor
        re-chained per token. The new token goes into the prefix's last page when that page has
        room and this prefix is its only holder; a full last page gets a fresh page after it,
        and a partial one that others hold too (a shared chain) is copied into a fresh page
        first (copy on write), so no other holder sees the token. Each prefix must be held by
        its decoding sequence alone (refs == 1): the caller owns it."""
        size = self.page_size
        slots: list[int] = []
        src: list[torch.Tensor] = []
        dst: list[torch.Tensor] = []
        for p in prefixes:
            if p.refs != 1:
                raise ExecutionError(f"grow of a prefix with {p.refs} holders")
            used = p.num_tokens % size
            if used == 0:  # (also an empty prefix)
                p.pages.append(self.take_page())
            elif self._refs[p.pages[-1]] > 1:
                old, fresh = p.pages[-1], self.take_page()
                src.append(torch.arange(old * size, old * size + used))
                dst.append(torch.arange(fresh * size, fresh * size + used))
                p.pages[-1] = fresh
                self.free_pages([old])
            slots.append(p.pages[-1] * size + used)
            p.num_tokens += 1
        self._copy(src, dst)
        return slots

    def _copy(self, src: list[torch.Tensor], dst: list[torch.Tensor]) -> None:
        """Copy the K/V at flat slots `src` to `dst` (all layers), in one copy per cache,
        staged without making the host wait for the passes queued before it."""
        if not dst:
            return
        src_slots = to_device(torch.cat(src), self.device)
        dst_slots = to_device(torch.cat(dst), self.device)
        for cache in (self.k, self.v):
            flat = cache.flatten(1, 2)
            if flat.dtype == KV_FP8:
                flat = flat.view(torch.uint8)
            flat[:, dst_slots] = flat[:, src_slots]
        if self.is_fp8:  # [L, P, Hkv, PAGE]: by page and offset
            size = self.page_size
            for scales in (self.k_scale, self.v_scale):
                scales[:, dst_slots // size, :, dst_slots % size] = \
                    scales[:, src_slots // size, :, src_slots % size]

    def take_page(self) -> int:
        """One free page, held once by the caller (evicting cached pages if none is free)."""
        entry = self.allocate(1)
        page = entry.pages[0]
        self._refs[page] += 1
        entry.release()  # (the caller's hold stays)
        return page

    def hold_pages(self, pages: list[int]) -> None:
        for page in pages:
            if self._refs[page] <= 0:
                raise ExecutionError(f"page {page} is free; it cannot be shared")
            self._refs[page] += 1

    def free_pages(self, pages: list[int]) -> None:
        """Drop one holder of each page; a page no one holds returns to the free list."""
        freed = []
        for page in pages:
            self._refs[page] -= 1
            if self._refs[page] == 0:
                freed.append(page)
        self._free.extend(reversed(freed))
        log.debug("freed %d pages (%d free)", len(freed), len(self._free))


class PagedPageStore:
    """prefix_cache.PageStore over the arena: a page is a page id; a chain of them is a
    PagedPrefix holding each page once more (no copy)."""

    # A row over cached pages runs the merged attention (the prefix's pages and its own keys
    # apart, in float32, then merged and rounded: gpu/attention.layer_attention) where a fresh
    # row runs one kernel; its prefill took about this much more GPU time per token (the prefix
    # tails A/B of bench/results/decode-gpu.md).
    prefix_row_cost = 0.16

    def __init__(self, arena: PagedKVArena):
        self.arena = arena
        self.page_size = arena.page_size

    def pages_of(self, kv: PagedPrefix, first: int, count: int) -> list[int]:
        return kv.pages[first:first + count]

    def prefix(self, pages: list[int], num_tokens: int) -> PagedPrefix:
        return self.arena.chain(list(pages), num_tokens)

    def done(self, kv: PagedPrefix) -> None:
        kv.release()

    def view(self, kv: PagedPrefix, num_tokens: int) -> PagedPrefix:
        """The first `num_tokens` of `kv`: its pages up to the one holding the last of them,
        held once more (a sequence after it copies the partial one: PagedKVArena.extend)."""
        return self.arena.chain(kv.pages[:-(-num_tokens // self.page_size)], num_tokens)
