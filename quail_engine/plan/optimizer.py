"""The logical optimizer: an ordered tuple of rules driven to a fixed point."""

from __future__ import annotations

import logging

from quail_engine.plan.context import PlanContext
from quail_engine.plan.nodes import Node
from quail_engine.plan.rules.equi_pairs import equi_pairs
from quail_engine.plan.rules.filter_to_scan import filter_to_scan
from quail_engine.plan.rules.form_ai_join import form_ai_join
from quail_engine.plan.rules.order_filters import order_filters
from quail_engine.plan.rules.prune_columns import prune_columns
from quail_engine.plan.rules.push_select import push_select
from quail_engine.plan.rules.share_kv import share_kv

log = logging.getLogger(__name__)

RULES = (push_select, equi_pairs, filter_to_scan, form_ai_join, prune_columns, order_filters,
         share_kv)


def optimize(plan: Node, ctx: PlanContext, rules=RULES, max_rounds: int = 20) -> Node:
    """Apply `rules` in order, repeatedly, until a whole round changes nothing."""
    for _ in range(max_rounds):
        before = plan
        for rule in rules:
            plan = rule(plan, ctx)
        if plan == before:
            return plan
    log.warning("optimizer did not reach a fixed point in %d rounds", max_rounds)
    return plan
