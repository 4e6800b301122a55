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


@pytest.mark.parametrize("work, loads, expected", [
    # equal anchors: one each, then around again
    ({1: 5, 2: 5, 3: 5, 4: 5}, {0: 0, 1: 0}, {1: 0, 2: 1, 3: 0, 4: 1}),
    # a worker already busy in this batch (an anchor placed by an earlier batch) gets less
    ({1: 5, 2: 5}, {0: 12, 1: 0}, {1: 1, 2: 1}),
    # largest first: the big anchor alone, the small ones together
    ({1: 1, 2: 100, 3: 1}, {0: 0, 1: 0}, {2: 0, 1: 1, 3: 1}),
])
def test_place_puts_the_most_work_on_the_least_loaded_worker(work, loads, expected):
    assert place(work, loads) == expected


def test_a_join_batch_of_whole_anchors_is_as_even_as_anchors_allow():
    # 16 anchors of 4,144 partner requests (the BIO join's shape) over 8 workers, one anchor
    # from the previous batch still pinned to worker 7 with 912 of its requests left
    work = {a: 4144.0 for a in range(16)}
    owners = place(work, {**dict.fromkeys(range(7), 0.0), 7: 912.0})
    per = [sum(work[a] for a, w in owners.items() if w == k) + (912 if k == 7 else 0)
           for k in range(8)]
    assert max(per) == 2 * 4144 + 912  # the best whole anchors allow (3 anchors: 12,432)


def test_gather_restores_request_order():
    shards = {0: [1, 3], 1: [0, 2]}
    assert gather(4, shards, {0: ["b", "d"], 1: ["a", "c"]}) == ["a", "b", "c", "d"]
