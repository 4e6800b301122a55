"""Which worker runs which request and holds which prefix: pure bookkeeping (no Ray, no torch).

A batch's requests that name a resident prefix are pinned to the worker holding it (a join's
anchor KV never moves); the others (a filter's or a classification's rows) are split into
contiguous row ranges that fill each worker up to a common token level, so every worker finishes
the batch at about the same time. A prefix is placed by the first batch that reads it, on the
worker with the least work in that batch.
"""

from __future__ import annotations

from collections.abc import Sequence


def fill_level(pinned: Sequence[float], free: float) -> float:
    """The token level T that the free work raises every worker to: sum(max(0, T - p)) = free
    (water filling over the pinned loads `pinned`)."""
    level, rest = 0.0, free
    ordered = sorted(pinned)
    for k, p in enumerate(ordered):
        nxt = ordered[k + 1] if k + 1 < len(ordered) else float("inf")
        width = k + 1  # workers at or below `p` are filled together
        if rest <= (nxt - p) * width:
            return p + rest / width
        rest -= (nxt - p) * width
        level = nxt
    return level


def route(costs: Sequence[int], owners: Sequence[int | None],
          workers: Sequence[int]) -> dict[int, list[int]]:
    """Request indices per worker. `costs[i]`: request i's tokens (its own, plus its prefix's
    when it has none resident); `owners[i]`: the worker holding its prefix, or None for a free
    request; `workers`: the live workers, in the order free row ranges are dealt out. Pinned
    requests stay with their owner; free ones are cut into contiguous ranges (row order kept)
    that bring every worker to the same total."""
    shards: dict[int, list[int]] = {w: [] for w in workers}
    pinned = dict.fromkeys(workers, 0.0)
    free: list[int] = []
    for i, (cost, owner) in enumerate(zip(costs, owners)):
        if owner is None:
            free.append(i)
        else:
            shards[owner].append(i)
            pinned[owner] += cost
    if free:
        level = fill_level(list(pinned.values()), float(sum(costs[i] for i in free)))
        caps = [max(0.0, level - pinned[w]) for w in workers]
        k, used = 0, 0.0
        for i in free:
            # move on past a worker with no share, or one whose share this request would
            # overfill by more than half of it
            while k < len(workers) - 1 and (caps[k] <= 0 or (
                    used > 0 and used + costs[i] / 2 > caps[k])):
                k, used = k + 1, 0.0
            shards[workers[k]].append(i)
            used += costs[i]
    return {w: s for w, s in shards.items() if s}


def place(work: dict[int, float], loads: dict[int, float]) -> dict[int, int]:
    """The worker each new prefix goes to: the prefix with the most work first (its tokens
    plus its requests' in this batch), each on the worker with the least work so far
    (`loads`: worker -> this batch's work pinned there already). Largest-first keeps a batch of
    a few big anchors as even as whole anchors allow."""
    loads = dict(loads)
    out = {}
    for key in sorted(work, key=lambda k: (-work[k], k)):
        w = min(loads, key=lambda k: (loads[k], k))
        loads[w] += work[key]
        out[key] = w
    return out


def gather(num: int, shards: dict[int, list[int]], results: dict[int, list]) -> list:
    """The answers in request order from each shard's answers (aligned with its indices)."""
    out: list = [None] * num
    for w, idx in shards.items():
        for i, answer in zip(idx, results[w], strict=True):
            out[i] = answer
    return out
