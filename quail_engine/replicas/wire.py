"""Requests and answers as they travel between the driver and a worker: columns of plain tuples
and lists instead of one dataclass per row.

Why: Ray pickles a shard in the driver's engine thread before the worker can start, and the
driver reads every answer back; per dataclass that is ~6 us to write and ~13 us to read for a
join's 25-token partner request, against ~1.5 and ~6 us as columns (bench/ray_scaling.py,
`serialization`). At 8 workers a 5 s batch holds ~120k partner requests, so the dataclass form
alone would cost the driver most of a second per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from quail_engine.infer.api import Answer, PrefixHandle, Readout, Request

# (token tuples, readout index per request, the distinct readouts, prefix id or -1,
#  prefix token count per request)
PackedRequests = tuple[list[tuple[int, ...]], list[int], list[Readout], list[int], list[int]]
PackedAnswers = tuple[list[object], list[float | None], list[float | None]]


def pack_requests(requests: Sequence[Request],
                  prefix_id: Callable[[int], int] | None = None) -> PackedRequests:
    """`prefix_id`: maps each request's prefix id to the id the worker knows it by."""
    readouts: dict[int, int] = {}
    distinct: list[Readout] = []
    index = []
    for r in requests:
        k = readouts.get(id(r.readout))
        if k is None:
            k = readouts[id(r.readout)] = len(distinct)
            distinct.append(r.readout)
        index.append(k)
    ids = [r.prefix.id if r.prefix is not None else -1 for r in requests]
    if prefix_id is not None:
        ids = [prefix_id(i) if i >= 0 else -1 for i in ids]
    return ([r.tokens for r in requests], index, distinct, ids,
            [r.prefix.num_tokens if r.prefix is not None else 0 for r in requests])


def unpack_requests(packed: PackedRequests) -> list[Request]:
    tokens, index, readouts, prefix_ids, prefix_lens = packed
    handles: dict[int, PrefixHandle] = {}
    out = []
    for t, k, pid, n in zip(tokens, index, prefix_ids, prefix_lens, strict=True):
        handle = None
        if pid >= 0:
            handle = handles.get(pid)
            if handle is None:
                handle = handles[pid] = PrefixHandle(pid, n)
        out.append(Request(t, readouts[k], handle))
    return out


def pack_answers(answers: Sequence[Answer]) -> PackedAnswers:
    return ([a.value for a in answers], [a.score for a in answers],
            [a.margin for a in answers])


def unpack_answers(packed: PackedAnswers) -> list[Answer]:
    return [Answer(v, s, m) for v, s, m in zip(*packed, strict=True)]
