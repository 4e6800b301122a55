"""The GPU path's paged KV arena on the host: slot indices and joins (a document's KV followed by
a question stem's), checked on CPU tensors."""

import torch

from quail_engine.infer.gpu.paged_kv import PagedKVArena


def _arena():
    return PagedKVArena(2, 1, 4, 16, 8, torch.float32, "cpu")


def test_slots_from_an_offset_are_the_tail_of_all_slots():
    arena = _arena()
    arena.allocate(5)  # the next prefix's pages are not 0, 1, 2
    p = arena.allocate(21)
    every = [page * 8 + i for page in p.pages for i in range(8)][:21]
    for start in (0, 1, 7, 8, 9, 16, 20, 21):
        assert p.slots(start).tolist() == every[start:]


def test_join_shares_whole_pages_and_copies_the_partial_page_and_the_other():
    arena = _arena()
    doc, stem = arena.allocate(19), arena.allocate(6)  # 19 tokens: two whole pages and 3
    for cache in (arena.k, arena.v):
        flat = cache.flatten(1, 2)
        flat[:, doc.slots()] = torch.arange(19.0)[None, :, None, None]
        flat[:, stem.slots()] = 100 + torch.arange(6.0)[None, :, None, None]
    (joined,) = arena.join([(doc, stem)])
    assert joined.num_tokens == 25 and joined.pages[:2] == doc.pages[:2]
    assert joined.pages[2] not in doc.pages + stem.pages
    for cache in (arena.k, arena.v):
        got = cache.flatten(1, 2)[:, joined.slots()][0, :, 0, 0]
        assert got.tolist() == list(range(19)) + [100.0 + i for i in range(6)]
