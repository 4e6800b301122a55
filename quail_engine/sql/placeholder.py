"""The placeholder calls that stand for AI operators in the lowered tree: `quail_ai_<id>(...)`,
each node marked with its op id in `meta`, so later passes find the op without parsing names."""

from __future__ import annotations

import re

from sqlglot import exp

from quail_engine.sql.ir import placeholder_name

OP_META = "quail_op"  # sqlglot node meta key: the op id a placeholder (or its wrapper) stands for


def placeholder_call(op_id: int, args: list[exp.Expr]) -> exp.Anonymous:
    """`quail_ai_<op_id>(args...)`, marked with its op id."""
    call = exp.Anonymous(this=placeholder_name(op_id), expressions=args)
    mark(call, op_id)
    return call


def mark(node: exp.Expr, op_id: int) -> None:
    node.meta[OP_META] = op_id


def op_id_of(node: exp.Expr) -> int | None:
    """The op id a node stands for, or None for any node that is not a placeholder."""
    return node.meta.get(OP_META) if node.meta else None


_NAME = re.compile(r"^quail_ai_(\d+)$", re.IGNORECASE)
_CALL = re.compile(r"\bquail_ai_(\d+)\s*\(", re.IGNORECASE)


def placeholder_id(name: str) -> int | None:
    """The op id of a function named `quail_ai_<id>` (as DuckDB SQL text spells it), else None:
    for trees read back from text, whose nodes carry no mark."""
    m = _NAME.match(name or "")
    return int(m.group(1)) if m else None


def placeholder_ids(sql: str) -> set[int]:
    """The op ids of every `quail_ai_<id>(...)` call in DuckDB SQL text (the scan of a relation
    built by hand, which has no tree)."""
    return {int(k) for k in _CALL.findall(sql)}
