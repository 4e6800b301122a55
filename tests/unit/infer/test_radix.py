"""The radix index over token ids (torch-free): longest cached chain, shared pages, pinning
and LRU eviction, and the shared beginnings a batch computes first."""

import random

import pytest

from quail_engine.infer.radix import (
    PrefixCounter,
    RadixIndex,
    branch_points,
    common_prefix_length,
)


class Pages:
    """A fake page store: counts who holds each payload."""

    def __init__(self):
        self.held: dict[str, int] = {}

    def hold(self, page):
        self.held[page] = self.held.get(page, 0) + 1

    def drop(self, page):
        self.held[page] -= 1


def _index(max_pages=None):
    pages = Pages()
    return RadixIndex(4, max_pages, pages.hold, pages.drop), pages


@pytest.mark.parametrize("tokens, cached", [
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], 8),     # two full pages, the ninth token is not a page
    ([1, 2, 3, 4, 5, 6, 7, 0, 9], 4),     # diverges inside page two
    ([1, 2, 3, 4, 5, 6, 7, 8], 8),
    ([1, 2, 3], 0),                       # shorter than a page
    ([9, 2, 3, 4, 5, 6, 7, 8], 0),
])
def test_match_finds_the_longest_cached_chain_of_whole_pages(tokens, cached):
    index, _ = _index()
    index.insert(list(range(1, 13)), ["a", "b", "c"])
    chain = index.match(tokens)
    assert sum(len(n.key) for n in chain) == cached
    assert (chain[-1].num_tokens if chain else 0) == cached


def test_match_can_leave_the_last_tokens_to_compute():
    index, _ = _index()
    index.insert(list(range(1, 9)), ["a", "b"])
    assert [n.page for n in index.match(list(range(1, 9)), max_tokens=7)] == ["a"]


def test_insert_shares_existing_pages_and_adopts_only_new_ones():
    index, pages = _index()
    index.insert([1, 2, 3, 4, 5, 6, 7, 8], ["a", "b"])
    chain = index.insert([1, 2, 3, 4, 9, 9, 9, 9], ["dup", "c"])
    assert [n.page for n in chain] == ["a", "c"]
    assert pages.held == {"a": 1, "b": 1, "c": 1}
    assert index.num_pages == 3


def test_eviction_is_lru_leaves_first_and_never_touches_pinned_pages():
    index, pages = _index()
    pinned = index.insert([1, 1, 1, 1, 2, 2, 2, 2], ["p1", "p2"])
    index.retain(pinned)
    index.insert([3, 3, 3, 3, 4, 4, 4, 4], ["old1", "old2"])
    index.insert([5, 5, 5, 5], ["new"])
    index.match([3, 3, 3, 3])  # the parent is used again, its leaf is not
    assert index.evict(1) == 1
    assert pages.held["old2"] == 0 and pages.held["old1"] == 1
    assert index.evict(10) == 2  # old1 (a leaf now), then new; never p1, p2
    assert pages.held == {"p1": 1, "p2": 1, "old1": 0, "old2": 0, "new": 0}
    index.release(pinned)
    assert index.evict(10) == 2 and index.num_pages == 0


def test_a_capacity_evicts_unpinned_pages_as_new_ones_arrive():
    index, pages = _index(max_pages=2)
    index.insert([1, 1, 1, 1], ["a"])
    index.insert([2, 2, 2, 2], ["b"])
    index.insert([3, 3, 3, 3, 4, 4, 4, 4], ["c", "d"])
    assert index.num_pages == 2 and pages.held == {"a": 0, "b": 0, "c": 1, "d": 1}


def test_release_of_an_unpinned_node_is_an_error():
    index, _ = _index()
    chain = index.insert([1, 2, 3, 4], ["a"])
    with pytest.raises(ValueError):
        index.release(chain)


@pytest.mark.parametrize("seqs, keep_last, expected", [
    # cumulative snapshots: the longest shared beginning covers every shorter one
    ([[1] * 4 + [2] * 4 + [9], [1] * 4 + [2] * 4 + [3] * 4 + [9], [1] * 4 + [9]], True,
     [8]),
    # two traces after one common header: each trace's beginning, not the header alone
    ([[7] * 4 + [1] * 4 + [5], [7] * 4 + [1] * 4 + [1] * 4 + [6],
      [7] * 4 + [2] * 4 + [5], [7] * 4 + [2] * 4 + [2] * 4 + [6]], True, [8, 8]),
    # a request keeps its last token: two equal 8-token prompts share one page, not two
    ([[1] * 8, [1] * 8], True, [4]),
    ([[1] * 8, [1] * 8], False, [8]),
    ([[1, 2, 3], [1, 2, 3, 4]], True, []),   # less than a page in common
    ([[1] * 4 + [2], [3] * 4 + [2]], True, []),
])
def test_branch_points_are_the_maximal_shared_beginnings(seqs, keep_last, expected):
    got = branch_points(seqs, 4, keep_last)
    assert sorted(n for _, n in got) == expected
    for i, n in got:
        assert sum(1 for s in seqs if s[:n] == seqs[i][:n]) >= 2


def test_minimum_tokens_count_each_beginning_once_across_batches():
    a, b, c = [1, 2, 3, 4], [1, 2, 3, 4, 5, 6], [1, 2, 7]
    counter = PrefixCounter()
    assert counter.add([b, a]) == (6, 21)  # positions 0..5 read 1..6 keys
    assert counter.add([c]) == (1, 3)  # [1, 2] is known: only 7 is new, at position 2
    assert counter.tokens == 7 and counter.attention_pairs == 24
    assert common_prefix_length(a, b) == 4 and common_prefix_length(a, c, 1) == 1


def test_minimum_tokens_remember_whole_chunks_of_earlier_batches():
    """A later call (the rows after a selectivity sample) does not count again the beginnings
    an earlier one ran, up to a partial chunk."""
    counter = PrefixCounter(grain=4)
    counter.add([list(range(10))])
    assert counter.add([[5] * 6]) == (6, 21)
    assert counter.add([list(range(9)) + [99]]) == (2, 9 + 10)  # 8 known from the chunks


def test_rows_after_a_head_count_as_their_concatenations_without_building_them():
    """A join's pairs over a resident anchor: the anchor once, each partner's tokens after it;
    the counts equal those of the concatenated sequences, across batches too."""
    rng = random.Random(3)
    heads = [[rng.randrange(9) for _ in range(40)] for _ in range(2)]
    tails = [[rng.randrange(3) for _ in range(rng.randint(1, 9))] for _ in range(30)]
    whole, parts = PrefixCounter(grain=4), PrefixCounter(grain=4)
    for batch in (tails[:12], tails[12:]):
        for head in heads:
            assert parts.add_after(head, batch) == whole.add([head + t for t in batch])
    assert (parts.tokens, parts.attention_pairs) == (whole.tokens, whole.attention_pairs)
    assert parts.tokens < sum(len(h) + len(t) for h in heads for t in tails)


def test_new_heads_over_the_same_rows_count_as_without_reuse():
    """A join asks each new anchor about the same partners, so a new head's first rows reuse the
    last new head's count and end state: heads met in later batches, rows that change between
    heads, rows as lists or tuples, all count exactly as each head's rows counted afresh."""

    class Afresh(PrefixCounter):
        def _first_tails(self, after, tails):
            return after.add(tails)

    rng = random.Random(5)
    heads = [[100 + h] + [rng.randrange(9) for _ in range(20)] for h in range(6)]
    rows = [[rng.randrange(3) for _ in range(rng.randint(1, 12))] for _ in range(40)]
    batches = [(heads[:3], rows[:25]), (heads[1:5], rows[25:]), (heads[4:], rows[:25]),
               (heads[5:], [tuple(r) for r in rows[:25]]), (heads[:2], rows[5:30]),
               ([[7] * 30, [8] * 30], rows[:25])]
    fresh, reused = Afresh(grain=4), PrefixCounter(grain=4)
    for hs, batch in batches:
        for head in hs:
            assert reused.add_after(head, batch) == fresh.add_after(head, batch)
    assert (reused.tokens, reused.attention_pairs) == (fresh.tokens, fresh.attention_pairs)
