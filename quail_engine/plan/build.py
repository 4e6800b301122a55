"""The naive logical plan of a core, exactly as written: a cross product of its scans, then the
equality and relational conjuncts, then every AI predicate in written order, then the AI
projections. The rules in `optimizer.RULES` turn it into the plan we run."""

from __future__ import annotations

from collections.abc import Sequence

from quail_engine.plan.nodes import AiFilter, Cross, Node, Project, Scan, Select


def doc_key(op, alias: str) -> str:
    """Document key of `op`'s part over `alias`: its binding expressions, in slot order."""
    return ",".join(b.sql for b in op.bindings if b.alias in (alias, None))


def build_logical(core, ai_ops: Sequence) -> Node:
    """`core` follows sql.query.Core (relations, filters, joins, projections)."""
    relations = list(core.relations)
    if not relations:
        raise ValueError("a core needs at least one relation")
    plan: Node = Scan(relations[0].alias)
    for rel in relations[1:]:
        plan = Cross(plan, Scan(rel.alias))
    for op_id in core.joins:
        join = ai_ops[op_id].join
        if join is None:
            continue
        # the front end keeps an equality as the join's only when one side reads each side of
        # the join (sql/cores.py `_core`): the aliases it reads are the join's own
        sides = frozenset((*join.left, *join.right))
        for conj in join.equi:
            plan = Select(plan, conj, sides)
    for rel in relations:
        for conj in getattr(rel, "conjuncts", ()) or ():
            plan = Select(plan, conj, frozenset((rel.alias,)))
    for op_id in (*core.filters, *core.joins):
        op = ai_ops[op_id]
        aliases = frozenset(op.aliases) or frozenset((relations[0].alias,))
        doc = doc_key(op, next(iter(sorted(aliases)))) if len(aliases) == 1 else ""
        plan = AiFilter(plan, op_id, aliases, doc=doc)
    if core.projections:
        plan = Project(plan, tuple(core.projections))
    return plan
