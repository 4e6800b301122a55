"""shared_paths: which beginnings of rows over one prefix are computed once, against a brute
force over every set of trie nodes on small cases."""

from itertools import combinations

import pytest

from quail_engine.infer.shared_paths import shared_paths


def _ran(rows, chosen, cost):
    """Tokens run with the path prefixes `chosen` (lengths of shared beginnings, each over the
    rows it prefixes): every path's own tokens and cost, each row after its longest path."""
    total = sum(len(p) + cost for p in chosen)
    for r in rows:
        covered = [len(p) for p in chosen if tuple(r[:len(p)]) == p and len(p) < len(r)]
        total += len(r) - max(covered, default=0)
    return total


def _brute(rows, cost):
    beginnings = {tuple(r[:n]) for r in rows for n in range(1, len(r))}
    shared = [b for b in beginnings if sum(tuple(r[:len(b)]) == b for r in rows) >= 2]
    best = sum(map(len, rows))
    for k in range(1, min(4, len(shared)) + 1):
        for chosen in combinations(shared, k):
            best = min(best, _ran(rows, chosen, cost))
    return best


CASES = [
    [[1, 2, 3, 9, 9], [1, 2, 3, 8, 9], [1, 2, 4, 9], [5, 6, 7], [5, 6, 8], [7]],
    [[4, 4, 4, 1], [4, 4, 4, 2], [4, 4, 4, 3], [4, 4, 5], [4, 9]],
    [[3, 1], [3, 2], [3, 1]],
    [[8, 8, 8, 8, 8, 8, 1], [8, 8, 8, 8, 8, 8, 2], [8, 8, 8, 8, 8, 8], [8, 8]],
]


@pytest.mark.parametrize("rows", CASES)
@pytest.mark.parametrize("cost", [0, 1, 3])
def test_paths_run_the_fewest_tokens_and_every_row_keeps_its_last(rows, cost):
    plan = shared_paths(rows, cost, max_paths=100)
    for r, p in zip(rows, plan.start):
        if p >= 0:
            first, depth = plan.paths[p]
            assert tuple(rows[first][:depth]) == tuple(r[:depth])
            assert depth < len(r)  # its answer's token stays its own
    chosen = [tuple(rows[first][:depth]) for first, depth in plan.paths]
    ran = _ran(rows, chosen, cost)
    assert ran == sum(map(len, rows)) - plan.saved
    assert ran == _brute(rows, cost)


def test_nothing_shared_or_not_worth_it_computes_no_path():
    assert shared_paths([[1, 2], [3, 4], [5]], 0, 10).paths == []
    assert shared_paths([[1, 2, 9], [1, 2, 8]], 5, 10).paths == []  # saves 2, costs 2 + 5
    assert shared_paths([[1, 2, 9]], 0, 10).paths == []


def test_a_budget_keeps_the_paths_over_most_rows():
    rows = [[1, 1, 1, k] for k in range(6)] + [[2, 2, 2, k] for k in range(3)]
    plan = shared_paths(rows, 0, max_paths=1)
    assert [(tuple(rows[f][:d])) for f, d in plan.paths] == [(1, 1, 1)]
    assert plan.start == [0] * 6 + [-1] * 3


def test_rows_that_extend_one_another_beyond_the_nesting_bound_compute_no_path():
    rows = [list(range(n + 2)) for n in range(80)]
    assert shared_paths(rows, 0, 100).paths == []
