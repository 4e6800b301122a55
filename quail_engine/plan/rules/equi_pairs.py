"""Rule: equality conjuncts over a cross product become an equi-join that restricts AI pairs."""

from __future__ import annotations

from dataclasses import replace

from quail_engine.plan.context import PlanContext
from quail_engine.plan.nodes import Cross, EquiJoin, Node, Select, transform_up
from quail_engine.sql.ir import Equality


def _spans(aliases: frozenset[str], left: Node, right: Node) -> bool:
    return bool(aliases & left.aliases()) and bool(aliases & right.aliases()) and \
        aliases <= left.aliases() | right.aliases()


def _merge(node: Node) -> Node:
    if not isinstance(node, Select) or not isinstance(node.predicate, Equality):
        return node
    child = node.input
    if isinstance(child, Cross) and _spans(node.aliases_used, child.left, child.right):
        return EquiJoin(child.left, child.right, (node.predicate,))
    if isinstance(child, EquiJoin) and _spans(node.aliases_used, child.left, child.right):
        return replace(child, equi=(*child.equi, node.predicate))
    return node


def equi_pairs(plan: Node, ctx: PlanContext) -> Node:
    """What: a Select holding `a.k = b.k` directly over cross(a, b) becomes equijoin[a.k = b.k].
    Why: candidate pairs of an AI join are then only the pairs with equal keys - no prompt runs
    for a pair the equality excludes.
    When: the predicate is an equality (the front end's `Equality`) and reads both sides of the
    product below it.
    Example: select[a.k = b.k](cross(scan(a), scan(b))) -> equijoin[a.k = b.k](scan(a), scan(b))
    """
    return transform_up(plan, _merge)
