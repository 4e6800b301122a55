"""Rule: an AI predicate over one relation goes directly over that relation's scan."""

from __future__ import annotations

from dataclasses import replace

from quail_engine.plan.context import PlanContext
from quail_engine.plan.nodes import AiFilter, AiJoin, Cross, EquiJoin, Node, transform_up


def _push(node: Node) -> Node:
    if not isinstance(node, AiFilter):
        return node
    child = node.input
    if isinstance(child, Cross | EquiJoin | AiJoin):
        left, right = child.children()
        if node.aliases_used <= left.aliases():
            return child.with_children((_push(replace(node, input=left)), right))
        if node.aliases_used <= right.aliases():
            return child.with_children((left, _push(replace(node, input=right))))
    return node


def filter_to_scan(plan: Node, ctx: PlanContext) -> Node:
    """What: moves an AI predicate that reads one side of a join below the join, to that side.
    Why: the predicate then runs once per row of its relation, not once per joined pair, and
    its survivors shrink the join's candidate pairs.
    When: the AiFilter sits over a cross/equi/AI join and its aliases lie within one side.
    Example: ai_filter#0(cross(scan(r), scan(p))) -> cross(ai_filter#0(scan(r)), scan(p))
    """
    return transform_up(plan, _push)
