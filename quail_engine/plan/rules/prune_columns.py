"""Rule: each scan reads only the columns some operator above it needs."""

from __future__ import annotations

from dataclasses import replace

from quail_engine.plan.context import PlanContext
from quail_engine.plan.nodes import AiFilter, AiJoin, Node, Project, Scan, transform_up, walk
from quail_engine.sql.ir import is_key_column, parse_binding_column


def prune_columns(plan: Node, ctx: PlanContext) -> Node:
    """What: sets Scan.columns to the binding columns (b_<op>_<i>) of the AI operators present
    in the plan plus every key column (k_<n>) of its relation.
    Why: only what a prompt or an equality needs moves from DuckDB to the executor.
    When: the context lists the relation's scan columns.
    Example: scan(r) with columns b_0_0, b_5_0, k_0 under ai_filter#0 -> scan(r; cols=b_0_0,k_0)
    """
    ops = {n.op for n in walk(plan) if isinstance(n, AiFilter | AiJoin)}
    ops |= {o for n in walk(plan) if isinstance(n, Project) for o in n.ops}

    def keep(column: str) -> bool:
        binding = parse_binding_column(column)
        return binding[0] in ops if binding else is_key_column(column)

    def prune(node: Node) -> Node:
        if isinstance(node, Scan) and node.alias in ctx.columns:
            cols = tuple(c for c in ctx.columns[node.alias] if keep(c))
            if cols != node.columns:
                return replace(node, columns=cols)
        return node

    return transform_up(plan, prune)
