"""The CPU path's page store for prefix sharing (prefix_cache.PageStore): a page is one
`page_size`-token slice of a computed PrefixKV (copied, so an evicted page frees its memory); a
chain of pages becomes a PrefixKV again by concatenation, once per chain and batch."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from quail_engine.infer.models.prefix_kv import PrefixKV

CPU_PAGE_SIZE = 16


class CpuPageStore:
    # (a row over cached pages merges two attentions here too, but at 16-token pages a shared
    # beginning is mostly whole pages, which the row reads anyway; its cost is unmeasured)
    prefix_row_cost = 0.0

    def __init__(self, page_size: int = CPU_PAGE_SIZE):
        self.page_size = page_size

    def pages_of(self, kv: PrefixKV, first: int, count: int) -> list[PrefixKV]:
        size = self.page_size
        return [PrefixKV([k[i * size:(i + 1) * size].clone() for k in kv.keys],
                         [v[i * size:(i + 1) * size].clone() for v in kv.values], size)
                for i in range(first, first + count)]

    def prefix(self, pages: Sequence[PrefixKV], num_tokens: int) -> PrefixKV:
        if len(pages) == 1:
            return pages[0]
        layers = range(len(pages[0].keys))
        return PrefixKV([torch.cat([p.keys[i] for p in pages]) for i in layers],
                        [torch.cat([p.values[i] for p in pages]) for i in layers], num_tokens)

    def done(self, kv: PrefixKV) -> None:
        """Pages are plain tensors: they live as long as the index or a reader holds them."""

    def view(self, kv: PrefixKV, num_tokens: int) -> PrefixKV:
        """The first `num_tokens` of `kv`, sliced (no copy)."""
        return PrefixKV([k[:num_tokens] for k in kv.keys], [v[:num_tokens] for v in kv.values],
                        num_tokens)


def pages_for_bytes(kv_bytes_per_token: int, page_size: int, budget_bytes: int) -> int:
    return max(1, budget_bytes // max(1, kv_bytes_per_token * page_size))


def cpu_kv_bytes_per_token(config) -> int:
    """A token's keys and values across the layers as the CPU keeps them (float32); 0 where
    the model's shape is not known (no config)."""
    if config is None:
        return 0
    return 2 * config.num_layers * config.num_kv_heads * config.head_dim * 4
