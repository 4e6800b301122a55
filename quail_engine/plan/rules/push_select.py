"""Rule: relational predicates go below AI operators and into the side of a join they read."""

from __future__ import annotations

from dataclasses import replace

from quail_engine.plan.context import PlanContext
from quail_engine.plan.nodes import (
    AiFilter,
    AiJoin,
    Cross,
    EquiJoin,
    Node,
    Project,
    Scan,
    Select,
    transform_up,
)


def _push(node: Node) -> Node:
    if not isinstance(node, Select):
        return node
    child = node.input
    if isinstance(child, AiFilter | Project):
        return child.with_children((_push(replace(node, input=child.input)),))
    if isinstance(child, Scan) and node.aliases_used <= {child.alias}:
        return replace(child, predicates=(*child.predicates, node.predicate))
    if isinstance(child, Cross | EquiJoin | AiJoin):
        left, right = child.children()
        if node.aliases_used and node.aliases_used <= left.aliases():
            return child.with_children((_push(replace(node, input=left)), right))
        if node.aliases_used and node.aliases_used <= right.aliases():
            return child.with_children((left, _push(replace(node, input=right))))
    return node


def push_select(plan: Node, ctx: PlanContext) -> Node:
    """What: moves each relational predicate (Select) below AI filters/projections, into the
    join side whose aliases it reads, and finally into the Scan itself.
    Why: every row a cheap SQL predicate removes is a prompt that never runs.
    When: a Select sits above an AI node, a join whose one side covers its aliases, or a Scan.
    Example: select[r.stars > 3](ai_filter#0(scan(r))) -> ai_filter#0(scan(r; where r.stars > 3))
    """
    return transform_up(plan, _push)
