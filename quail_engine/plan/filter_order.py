"""Order AI filters over one input: rank = cost / (1 - selectivity), each filter tried first.

The first filter over a document pays for encoding it; later filters over the same document
pay only their question (its KV is shared). So the cost of a filter depends on what ran before:
we try each filter first (it pays a full scan of its document) with the rest in rank order of
their marginal cost, and keep the order of lowest expected cost.
"""

from __future__ import annotations

from collections.abc import Sequence

from quail_engine.plan.context import PlanContext
from quail_engine.plan.cost import request_work
from quail_engine.sql.op_kinds import spec


def marginal_seconds(op: int, seen_docs: set[str], ctx: PlanContext) -> float:
    """Seconds per input row for filter `op` given the documents already encoded."""
    info = ctx.ops[op]
    is_new = info.doc not in seen_docs
    work = request_work(info.doc_tokens(), info.question_tokens, is_new, info.shared_tokens())
    return ctx.seconds(work.scaled(1000.0 * spec(info.kind).num_requests)) / 1000.0


def expected_seconds(order: Sequence[int], rows: float, ctx: PlanContext) -> float:
    """Expected seconds of running `order` over `rows` input rows."""
    seen: set[str] = set()
    total, n = 0.0, float(rows)
    for op in order:
        total += n * marginal_seconds(op, seen, ctx)
        seen.add(ctx.ops[op].doc)
        n *= ctx.ops[op].selectivity
    return total


def rank(op: int, seen_docs: set[str], ctx: PlanContext) -> float:
    sel = ctx.ops[op].selectivity
    cost = marginal_seconds(op, seen_docs, ctx)
    return float("inf") if sel >= 1.0 else cost / (1.0 - sel)


def choose_order(ops: Sequence[int], rows: float, ctx: PlanContext) -> tuple[int, ...]:
    """The order to run filters `ops` (given as written) over `rows` rows."""
    ops = tuple(ops)
    if len(ops) < 2 or any(ctx.ops[o].as_written for o in ops):
        return ops
    best: tuple[float, tuple[int, ...]] | None = None
    for first in ops:
        seen = {ctx.ops[first].doc}
        rest = sorted((o for o in ops if o != first),
                      key=lambda o: (rank(o, seen, ctx), ops.index(o)))
        order = (first, *rest)
        cost = expected_seconds(order, rows, ctx)
        if best is None or cost < best[0] * (1 - 1e-12):
            best = (cost, order)
    return best[1]
