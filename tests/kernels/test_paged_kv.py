"""The GPU path's paged KV arena on the host: slot indices and extensions (a document's KV followed by
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


def test_extend_shares_whole_pages_copies_the_partial_page_and_writes_after_it():
    """A pass that stores a sequence after a prefix (a question stem after a document, a row
    after a beginning shared to the token) gets the whole sequence's KV: the prefix's whole
    pages by reference, its partial last page copied into a fresh page, and the slots where
    the new tokens go right after that copy, so nothing of the new tokens is ever copied."""
    arena = _arena()
    doc = arena.allocate(19)  # 19 tokens: two whole pages and 3
    for cache in (arena.k, arena.v):
        cache.flatten(1, 2)[:, doc.slots()] = torch.arange(19.0)[None, :, None, None]
    ((joined, slots), (aligned, own), (alone, first)) = arena.extend(
        [(doc, 6), (arena.chain(doc.pages[:2], 16), 2), (None, 3)])
    assert joined.num_tokens == 25 and joined.pages[:2] == doc.pages[:2]
    assert joined.pages[2] not in doc.pages
    assert slots.tolist() == joined.slots(19).tolist()
    assert aligned.pages[:2] == doc.pages[:2] and own.tolist() == aligned.slots(16).tolist()
    assert alone.num_tokens == 3 and first.tolist() == alone.slots().tolist()
    for cache in (arena.k, arena.v):
        flat = cache.flatten(1, 2)
        flat[:, slots] = 100 + torch.arange(6.0)[None, :, None, None]
        got = flat[:, joined.slots()][0, :, 0, 0]
        assert got.tolist() == list(range(19)) + [100.0 + i for i in range(6)]
        assert flat[:, doc.slots()][0, :, 0, 0].tolist() == list(range(19))


def test_grow_appends_in_place_and_copies_a_shared_partial_page_first():
    """A decoding sequence's KV grows one token at a time: into its own last page while it has
    room, onto a fresh page when it is full, and, when its partial last page is shared with
    another holder (a chain), into a copy of that page, so the other holder never sees it."""
    arena = _arena()
    own = arena.allocate(7)  # 7 of a page of 8
    (slot,) = arena.grow([own])
    assert slot == own.pages[0] * 8 + 7 and own.num_tokens == 8 and len(own.pages) == 1
    (slot,) = arena.grow([own])
    assert len(own.pages) == 2 and slot == own.pages[1] * 8
    doc = arena.allocate(11)
    for cache in (arena.k, arena.v):
        cache.flatten(1, 2)[:, doc.slots()] = torch.arange(11.0)[None, :, None, None]
    chain = arena.chain(doc.pages, 11)  # shares both pages, the last one partial
    free = arena.num_free_pages
    (slot,) = arena.grow([chain])
    assert chain.pages[0] == doc.pages[0] and chain.pages[1] != doc.pages[1]
    assert slot == chain.pages[1] * 8 + 3 and arena.num_free_pages == free - 1
    for cache in (arena.k, arena.v):
        flat = cache.flatten(1, 2)
        assert flat[:, chain.slots()][0, :11, 0, 0].tolist() == list(range(11))
        flat[:, slot] = -1.0
        assert flat[:, doc.slots()][0, :, 0, 0].tolist() == list(range(11))
    for p in (own, doc, chain):
        p.release()
    assert arena.num_free_pages == arena.num_pages
