"""Rule: an AI predicate reading both sides of a product becomes an AI join."""

from __future__ import annotations

from quail_engine.plan.context import PlanContext
from quail_engine.plan.nodes import AiFilter, AiJoin, Cross, EquiJoin, Node, transform_up


def _form(node: Node) -> Node:
    if not isinstance(node, AiFilter):
        return node
    child = node.input
    if not isinstance(child, Cross | EquiJoin):
        return node
    if not (node.aliases_used & child.left.aliases() and node.aliases_used & child.right.aliases()):
        return node
    equi = child.equi if isinstance(child, EquiJoin) else ()
    return AiJoin(child.left, child.right, node.op, equi)


def form_ai_join(plan: Node, ctx: PlanContext) -> Node:
    """What: ai_filter over cross/equijoin(left, right) reading both sides -> ai_join(left,
    right) carrying the equality conjuncts as its pair restriction.
    Why: a join is planned pair-wise with an anchor whose document KV is computed once; as a
    filter over a product it would re-encode both documents for every pair.
    When: the AiFilter's aliases intersect both inputs of the product directly below it.
    Example: ai_filter#2(equijoin[a.k = b.k](scan(a), scan(b))) -> ai_join#2[a.k = b.k](...)
    """
    return transform_up(plan, _form)
