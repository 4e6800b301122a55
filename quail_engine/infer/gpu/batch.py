"""PackedBatch: the per-forward metadata of the GPU path, built once on the host.

Sequences are reordered so that all sequences sharing one resident prefix sit next to each
other; each such run is one segment of the prefix-attention kernel (its queries share every
K/V tile of the anchor). Sequences without a prefix form segments of prefix length 0.
Reads are remapped into the new order, so callers see rows in their own order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from quail_engine.infer.gpu.attention import (
    CausalPlan,
    LibAttention,
    PrefixPlan,
    plan_causal,
    plan_prefix,
)
from quail_engine.infer.gpu.paged_kv import PagedKVArena, PagedPrefix
from quail_engine.infer.gpu.staging import to_device


@dataclass
class PackedBatch:
    input_ids: torch.Tensor        # [T] long, reordered
    positions: torch.Tensor        # [T] long
    cu_seqlens: torch.Tensor       # [B+1] int32
    max_seqlen: int
    read_index: torch.Tensor       # [R] long rows in the reordered pack, in the caller's order
    has_prefix: bool
    seg_cu: torch.Tensor | None    # [S+1] int32 query rows of each prefix segment
    prefix_plan: PrefixPlan | None    # which kernel reads which prefix keys (attention.py)
    max_seg_len: int
    store_rows: torch.Tensor | None   # [N] long rows whose K/V go to the arena
    store_slots: torch.Tensor | None  # [N] long flat arena slots
    stored: list[PagedPrefix | None]  # per sequence in the caller's order
    causal_plan: CausalPlan | None = None  # long sequences' own attention in the library
    decode: bool = False  # one token per sequence, its K/V stored at the end of its prefix
    # [B] long: each sequence's prefix segment, built on first use (the fp8 rows' scale bound
    # reads it in every layer: attention.row_bound)
    _seq_seg: torch.Tensor | None = field(default=None, repr=False)

    def seq_seg(self) -> torch.Tensor:
        """[B] long: the prefix segment each packed sequence reads (a batch with prefixes; the
        same in every layer of the pass, so built once, not once a layer: a small pass's time
        is its launches). A segment is whole sequences, so a sequence's first row says it."""
        if self._seq_seg is None:
            self._seq_seg = torch.searchsorted(self.seg_cu, self.cu_seqlens[:-1],
                                               right=True) - 1
        return self._seq_seg


def _order(prefixes: Sequence[PagedPrefix | None]) -> list[int]:
    first_seen: dict[int, int] = {}
    for b, p in enumerate(prefixes):
        first_seen.setdefault(id(p) if p is not None else 0, b)
    return sorted(range(len(prefixes)),
                  key=lambda b: (first_seen[id(prefixes[b]) if prefixes[b] is not None else 0], b))


def pack(input_ids: torch.Tensor, positions: torch.Tensor, cu_seqlens: torch.Tensor,
         prefixes: Sequence[PagedPrefix | None], read_index: torch.Tensor,
         store_kv: Sequence[bool] | None, arena: PagedKVArena | None,
         device: torch.device | None = None, lib: LibAttention | None = None) -> PackedBatch:
    """Inputs may live on the host (no GPU sync) or on `device`; outputs live on `device`.
    `lib`: the library's attention for long prefix segments and long sequences, if the model
    has one."""
    device = device or input_ids.device
    bounds = [int(x) for x in cu_seqlens.tolist()]
    num_seqs = len(bounds) - 1
    if len(prefixes) != num_seqs:
        raise ValueError(f"{len(prefixes)} prefixes for {num_seqs} sequences")
    for p in prefixes:
        if p is not None and not isinstance(p, PagedPrefix):
            raise ValueError(f"the GPU path takes PagedPrefix prefixes, got {type(p).__name__}")
    store = list(store_kv) if store_kv is not None else [False] * num_seqs
    order = _order(prefixes)
    lengths = [bounds[b + 1] - bounds[b] for b in range(num_seqs)]
    new_start: dict[int, int] = {}
    pos = 0
    for b in order:
        new_start[b] = pos
        pos += lengths[b]
    identity = order == list(range(num_seqs))
    if identity:
        ids, poss = input_ids, positions
        reads = read_index
    else:
        perm = torch.cat([torch.arange(bounds[b], bounds[b + 1]) for b in order])
        perm = perm.to(input_ids.device)
        ids, poss = input_ids[perm], positions[perm]
        old_to_new = torch.empty_like(perm)
        old_to_new[perm] = torch.arange(perm.numel(), device=perm.device)
        reads = old_to_new[read_index.to(perm.device)]
    ids, poss, reads = (to_device(t, device) for t in (ids, poss, reads))
    new_cu = [0]
    for b in order:
        new_cu.append(new_cu[-1] + lengths[b])

    has_prefix = any(p is not None and p.num_tokens > 0 for p in prefixes)
    seg_cu = plan = None
    max_seg = 0
    if has_prefix:
        if arena is None:
            raise ValueError("sequences with a resident prefix need the KV arena")
        segs: list[tuple[PagedPrefix | None, int, int]] = []
        for b in order:
            p = prefixes[b] if prefixes[b] is not None and prefixes[b].num_tokens > 0 else None
            start, end = new_start[b], new_start[b] + lengths[b]
            if segs and segs[-1][0] is p:
                segs[-1] = (p, segs[-1][1], end)
            else:
                segs.append((p, start, end))
        seg_cu = to_device([s for _, s, _ in segs] + [segs[-1][2]], device, torch.int32)
        plan = plan_prefix(segs, pos, arena.page_size, device, lib)
        max_seg = max(e - s for _, s, e in segs)

    # a stored sequence's KV is its prefix's followed by its own tokens, written in place
    stored: list[PagedPrefix | None] = [None] * num_seqs
    rows, slots = [], []
    kept = [b for b in range(num_seqs) if store[b]]
    if kept and arena is None:
        raise ValueError("store_kv needs a KV arena")
    if kept:
        for b, (entry, own) in zip(kept, arena.extend([(prefixes[b], lengths[b])
                                                       for b in kept])):
            stored[b] = entry
            rows.append(torch.arange(new_start[b], new_start[b] + lengths[b]))
            slots.append(own)
    return PackedBatch(
        input_ids=ids, positions=poss,
        cu_seqlens=to_device(new_cu, device, torch.int32),
        max_seqlen=max(lengths, default=0), read_index=reads, has_prefix=has_prefix,
        seg_cu=seg_cu, prefix_plan=plan, max_seg_len=max_seg,
        store_rows=to_device(torch.cat(rows), device) if rows else None,
        store_slots=to_device(torch.cat(slots), device) if slots else None, stored=stored,
        causal_plan=plan_causal([lengths[b] for b in order], device, lib))


def grow_rows(prefixes: Sequence[PagedPrefix], arena: PagedKVArena,
              pad_page: int = 0) -> tuple[list[int], list[int], list[list[int]]]:
    """A decode step's host side: each prefix grown by its token (PagedKVArena.grow) ->
    (each token's slot, each prefix's length with it, block-table rows padded with
    `pad_page` to the longest)."""
    slots = arena.grow(list(prefixes))
    width = max(len(p.pages) for p in prefixes)
    return (slots, [p.num_tokens for p in prefixes],
            [p.pages + [pad_page] * (width - len(p.pages)) for p in prefixes])


def pack_decode(input_ids: Sequence[int], prefixes: Sequence[PagedPrefix], arena: PagedKVArena,
                device: torch.device) -> PackedBatch:
    """A decode step's batch: token b continues `prefixes[b]`, which grows by it in place
    (PagedKVArena.grow). Its K/V is stored at the prefix's new last slot before attention, so
    each token attends over its whole prefix, itself included, in one prefix-attention
    segment: no causal part of its own and no merge, and the host builds only the block table
    and three short vectors."""
    slots, lens, rows = grow_rows(prefixes, arena)
    table = torch.tensor(rows, dtype=torch.int32)
    n = len(prefixes)
    rows = torch.arange(n, device=device)
    cu = torch.arange(n + 1, dtype=torch.int32, device=device)
    # max_len 0: the long-prefix tiles whatever the batch's longest prefix, as the decode
    # graphs (decode_graph.py) use, so a row's attention does not change with its batch
    plan = PrefixPlan(to_device(table, device), to_device(lens, device, torch.int32),
                      runs=[(0, n, None)], max_len=0)
    return PackedBatch(
        input_ids=to_device(input_ids if isinstance(input_ids, torch.Tensor)
                            else list(input_ids), device),
        positions=to_device([m - 1 for m in lens], device), cu_seqlens=cu, max_seqlen=1,
        read_index=rows, has_prefix=True, seg_cu=cu, prefix_plan=plan, max_seg_len=1,
        store_rows=rows, store_slots=to_device(slots, device), stored=list(prefixes),
        decode=True)
