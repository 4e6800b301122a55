"""How a batch is split over Ray workers (quail_engine/replicas/sharding.py): the work each worker
gets decides when the batch is done, and a join's anchors must never move."""

import pytest

from quail_engine.replicas.sharding import fill_level, gather, place, route


@pytest.mark.parametrize("pinned, free, level", [
    ([0, 0], 10, 5.0),
    ([4, 0], 10, 7.0),
    ([20, 0], 10, 10.0),      # the free work cannot reach the busy worker
    ([3, 3, 3], 0, 3.0),
    ([0, 2, 8], 6, 4.0),
])
def test_fill_level_brings_workers_to_one_level(pinned, free, level):
    assert fill_level(pinned, free) == pytest.approx(level)


@pytest.mark.parametrize("costs, owners, workers, expected", [
    # rows without a prefix: contiguous ranges of about equal tokens
    ([10] * 6, [None] * 6, [0, 1], {0: [0, 1, 2], 1: [3, 4, 5]}),
    ([30, 10, 10, 10], [None] * 4, [0, 1], {0: [0], 1: [1, 2, 3]}),
    # fewer rows than workers: some workers idle
    ([5], [None], [0, 1, 2], {0: [0]}),
    # requests over a prefix stay on its worker, wherever they sit in the batch
    ([4, 4, 4, 4], [1, 0, 1, 0], [0, 1], {0: [1, 3], 1: [0, 2]}),
    # free rows fill the less loaded worker first
    ([10, 10, 5, 5, 5, 5], [0, 0, None, None, None, None], [0, 1],
     {0: [0, 1], 1: [2, 3, 4, 5]}),
    # a dead worker (2) is not among the live ones
    ([1] * 4, [None] * 4, [0, 3], {0: [0, 1], 3: [2, 3]}),
])
def test_route(costs, owners, workers, expected):
    assert route(costs, owners, workers) == expected


def test_route_covers_every_request_once_and_balances_tokens():
    costs = [(i * 37) % 101 + 1 for i in range(500)]
    shards = route(costs, [None] * 500, [0, 1, 2, 3])
    assert sorted(i for s in shards.values() for i in s) == list(range(500))
    totals = [sum(costs[i] for i in s) for s in shards.values()]
    assert max(totals) - min(totals) <= 2 * max(costs)
    assert all(s == list(range(s[0], s[-1] + 1)) for s in shards.values())  # row ranges


@pytest.mark.parametrize("costs, loads, expected", [
    ([5, 5, 5, 5], {0: 0, 1: 0}, [0, 1, 0, 1]),
    ([5, 5], {0: 12, 1: 0}, [1, 1]),
    ([100, 1, 1], {0: 0, 1: 0, 2: 0}, [0, 1, 2]),
])
def test_place_puts_prefixes_on_the_least_loaded_worker(costs, loads, expected):
    assert place(costs, loads) == expected


def test_gather_restores_request_order():
    shards = {0: [1, 3], 1: [0, 2]}
    assert gather(4, shards, {0: ["b", "d"], 1: ["a", "c"]}) == ["a", "b", "c", "d"]
