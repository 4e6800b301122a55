"""Requests and answers as they travel between the driver and a worker: columns of plain tuples
and lists instead of one dataclass per row.

Why: Ray pickles a shard in the driver's engine thread before the worker can start, and the
driver reads every answer back. A short partner request pickles and unpickles several times
faster as columns than as a dataclass, and a batch over many workers holds tens of thousands of
them, so the dataclass form alone would take a noticeable share of the driver's time per batch
(bench/ray_scaling.py's `serialization` measures both forms).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from quail_engine.infer.api import Answer, PrefixHandle, Readout, Request

# (token tuples, readout index per request, the distinct readouts, prefix id or -1)
PackedRequests = tuple[list[tuple[int, ...]], list[int], list[Readout], list[int]]
PackedAnswers = tuple[list[object], list[float | None], list[float | None]]


def pack_requests(requests: Sequence[Request]) -> PackedRequests:
    readouts: dict[int, int] = {}
    distinct: list[Readout] = []
    index = []
    for r in requests:
        k = readouts.get(id(r.readout))
        if k is None:
            k = readouts[id(r.readout)] = len(distinct)
            distinct.append(r.readout)
        index.append(k)
    return ([r.tokens for r in requests], index, distinct,
            [r.prefix.id if r.prefix is not None else -1 for r in requests])


def unpack_requests(packed: PackedRequests,
                    handles: Mapping[int, PrefixHandle] | None = None) -> list[Request]:
    """`handles`: the worker's own handle of each prefix id (default: handles of those ids)."""
    tokens, index, readouts, prefix_ids = packed
    own = {} if handles is None else handles
    out = []
    for t, k, pid in zip(tokens, index, prefix_ids, strict=True):
        handle = None
        if pid >= 0:
            handle = own.get(pid) if handles is not None else PrefixHandle(pid, 0)
            if handle is None:
                raise KeyError(f"prefix {pid} is not resident on this worker")
        out.append(Request(t, readouts[k], handle))
    return out


def pack_answers(answers: Sequence[Answer]) -> PackedAnswers:
    return ([a.value for a in answers], [a.score for a in answers],
            [a.margin for a in answers])


def unpack_answers(packed: PackedAnswers) -> list[Answer]:
    return [Answer(v, s, m) for v, s, m in zip(*packed, strict=True)]
