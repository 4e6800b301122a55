"""How many documents the executor holds resident at once (plan/chunking.py), applied to what
it observes: the KV arena's size (None: an unbounded store) and the documents' tokens."""

import pytest

from quail_engine.plan.chunking import Chunking

C = Chunking()


@pytest.mark.parametrize("capacity,mean,tokens,first,expected", [
    (None, 100.0, None, 0.0, 256),             # unbounded: the row cap
    (25_600, 0.0, None, 0.0, 256),             # nothing measured: the row cap
    (25_600, 100.0, None, 0.0, 64),            # a quarter of the arena: 6,400 / 100
    (25_600, 10.0, None, 0.0, 256),            # short documents: the row cap binds
    (25_600, 100_000.0, None, 0.0, 1),         # one document past the share: alone
    (25_600, 100.0, [100.0] + [164.0] * 60, 0.0, 39),   # own pages of shared beginnings
    (25_600, 100.0, [100.0] + [164.0] * 60, 3000.0, 21),  # the first counted whole
    (25_600, 100.0, [7000.0], 0.0, 1),
])
def test_filter_chunk(capacity, mean, tokens, first, expected):
    assert C.filter_chunk(capacity, mean, tokens, first) == expected


@pytest.mark.parametrize("capacity,resident,tokens,expected", [
    (None, 0, [10, 10], [True, True]),
    (100, 0, [30, 30, 30], [True, False, False]),     # half of the arena: 50 tokens
    (100, 20, [30, 10, 5], [True, False, False]),
    (100, 0, [60, 20, 20], [False, True, True]),      # a long one skipped, later short ones kept
])
def test_carry_keep(capacity, resident, tokens, expected):
    assert C.carry_keep(capacity, resident, tokens) == expected


@pytest.mark.parametrize("capacity,tokens,page,expected", [
    (None, [0] * 300, 0, [128, 128, 44]),
    (None, [], 0, []),
    (None, [0] * 300, 16, [128, 128, 44]),              # unbounded: pages do not count
    (400, [50] * 5, 0, [2, 2, 1]),                      # a quarter of 400 tokens per chunk
    (400, [34] * 5, 16, [2, 2, 1]),                     # each document a page more
    (400, [150, 10, 10], 0, [1, 2]),                    # one past the budget goes alone
    (10**9, [1] * 2500, 0, [1024, 1024, 452]),          # the anchor cap on a large arena
])
def test_anchor_chunks(capacity, tokens, page, expected):
    assert C.anchor_chunks(capacity, tokens, page) == expected


@pytest.mark.parametrize("chunk,missing,expected", [
    (256, 3, 8),       # few rows missing: at least limit_min_rows
    (256, 40, 80),     # twice those missing (some fail)
    (50, 40, 50),      # never past the resident chunk
])
def test_limit_chunk(chunk, missing, expected):
    assert C.limit_chunk(chunk, missing) == expected
