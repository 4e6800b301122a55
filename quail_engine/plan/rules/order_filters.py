"""Rule: a chain of AI filters over one input runs in the order of lowest expected cost."""

from __future__ import annotations

from dataclasses import replace

from quail_engine.plan.context import PlanContext
from quail_engine.plan.filter_order import choose_order
from quail_engine.plan.nodes import AiFilter, Node, Scan


def _chain(node: AiFilter) -> tuple[list[AiFilter], Node]:
    chain: list[AiFilter] = []
    cur: Node = node
    while isinstance(cur, AiFilter):
        chain.append(cur)
        cur = cur.input
    return chain[::-1], cur  # innermost (runs first) first


def _rebuild(chain: list[AiFilter], base: Node) -> Node:
    out = base
    for f in chain:
        out = replace(f, input=out)
    return out


def _reorder(node: Node, ctx: PlanContext) -> Node:
    if isinstance(node, AiFilter):
        chain, base = _chain(node)
        new_base = _reorder(base, ctx)
        rows = float(ctx.rows.get(base.alias, 1000.0)) if isinstance(base, Scan) else 1000.0
        order = choose_order([f.op for f in chain], rows, ctx)
        by_op = {f.op: f for f in chain}
        new_chain = [by_op[o] for o in order]
        if new_base is base and new_chain == chain:
            return node
        return _rebuild(new_chain, new_base)
    kids = node.children()
    new_kids = tuple(_reorder(k, ctx) for k in kids)
    if any(a is not b for a, b in zip(new_kids, kids)):
        return node.with_children(new_kids)
    return node


def order_filters(plan: Node, ctx: PlanContext) -> Node:
    """What: rewrites each maximal chain ai_filter#a(ai_filter#b(X)) in the order
    `filter_order.choose_order` picks (rank = cost / (1 - selectivity), each tried first).
    Why: a cheap, selective filter first leaves fewer rows for the expensive ones.
    When: two or more AI filters sit directly over the same input and none says
    order => 'as_written'.
    Example: with selectivities #0=0.9, #1=0.1 and equal costs,
    ai_filter#1(ai_filter#0(scan(r))) -> ai_filter#0(ai_filter#1(scan(r)))
    """
    return _reorder(plan, ctx)
