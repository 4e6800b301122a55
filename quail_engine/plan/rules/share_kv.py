"""Rule: AI filters over one document share its KV: the document is encoded once."""

from __future__ import annotations

from dataclasses import replace

from quail_engine.plan.context import PlanContext
from quail_engine.plan.nodes import AiFilter, Node


def _mark(node: Node) -> Node:
    if isinstance(node, AiFilter):
        new_input = _mark(node.input)
        below = _docs_below(node.input)
        shares = bool(node.doc) and node.doc in below
        if new_input is node.input and shares == node.shares_kv:
            return node
        return replace(node, input=new_input, shares_kv=shares)
    kids = node.children()
    new_kids = tuple(_mark(k) for k in kids)
    if any(a is not b for a, b in zip(new_kids, kids)):
        return node.with_children(new_kids)
    return node


def _docs_below(node: Node) -> frozenset[str]:
    out: set[str] = set()
    while isinstance(node, AiFilter):
        if node.doc:
            out.add(node.doc)
        node = node.input
    return frozenset(out)


def share_kv(plan: Node, ctx: PlanContext) -> Node:
    """What: marks an AI filter `[kv]` when a filter below it in the same chain reads the same
    document, so the executor keeps that document's KV resident and this filter's prompts cost
    only their question tokens.
    Why: a review asked three questions is encoded once, not three times.
    When: two filters of one chain have the same document key (same binding expressions).
    Example: ai_filter#1(ai_filter#0(scan(r))), both over r.review ->
    ai_filter#1[kv](ai_filter#0(scan(r)))
    """
    return _mark(plan)
