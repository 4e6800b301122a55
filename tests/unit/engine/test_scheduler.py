"""Packing requests into forward passes."""

import pytest

from quail_engine.infer.scheduler import Scheduler, SeqWork


@pytest.mark.parametrize(
    "budget, max_seqs, lengths, expected",
    [
        (10, 8, [4, 4, 4], [[0, 1], [2]]),
        (12, 8, [4, 4, 4], [[0, 1, 2]]),
        (10, 2, [1, 1, 1, 1, 1], [[0, 1], [2, 3], [4]]),
        (10, 8, [30, 2, 3], [[0], [1, 2]]),   # too long for the budget: runs alone
        (10, 8, [2, 30, 3], [[0], [1], [2]]),
        (10, 8, [], []),
    ],
)
def test_pack_respects_budgets(budget, max_seqs, lengths, expected):
    sched = Scheduler(token_budget=budget, max_seqs=max_seqs)
    assert sched.pack([SeqWork(n) for n in lengths]) == expected


def test_context_budget_counts_prefix_attention():
    sched = Scheduler(token_budget=1000, context_budget=1000)
    work = [SeqWork(10, num_prefix_tokens=40)] * 3   # 500 attention pairs each
    assert sched.pack(work) == [[0, 1], [2]]


def test_pack_sorted_covers_every_index_once():
    sched = Scheduler(token_budget=8)
    work = [SeqWork(n) for n in [5, 1, 7, 2, 3, 3]]
    passes = sched.pack_sorted(work)
    assert sorted(i for p in passes for i in p) == list(range(6))
    assert all(sum(work[i].num_tokens for i in p) <= 8 or len(p) == 1 for p in passes)
    assert len(passes) == 3


@pytest.mark.parametrize("kwargs", [{"token_budget": 0}, {"max_seqs": 0}])
def test_bad_budget_is_rejected(kwargs):
    with pytest.raises(ValueError):
        Scheduler(**kwargs)


def test_empty_sequence_is_rejected():
    with pytest.raises(ValueError, match="sequence 1 has no tokens"):
        Scheduler().pack([SeqWork(3), SeqWork(0)])
