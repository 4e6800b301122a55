"""The AI calls in the input of a SELECT's lateral sources: Snowflake's `LATERAL FLATTEN(input =>
AI_CLASSIFY(t.body, [...], {'output_mode': 'multi'}):labels) f` (an UNNEST of the labels, or a
lateral subquery over json_each: sql/flatten.py), BigQuery's `FROM t, UNNEST(AI.CLASSIFY(...))`,
Databricks' `LATERAL VIEW explode(from_json(ai_classify(...):response, 'array<string>'))`.

DuckDB evaluates such an input once per row of the relations before it, so a call there that
reads one of the core's relations is a projection of the core (sql/cores.py): its answers are
computed batched and cost-ordered over that relation's rows first, and DuckDB unnests what the
function reads back from the answer store. Left to DuckDB, it ran row by row, unplanned."""

from __future__ import annotations

from sqlglot import exp

from quail_engine.sql.ir import AiOp
from quail_engine.sql.placeholder import op_id_of
from quail_engine.sql.row_calls import is_row_level, reads_one
from quail_engine.sql.sources import alias_of, sources_of


def lateral_calls(select: exp.Select, ops: list[AiOp], sources: dict[str, exp.Expr]) -> list[int]:
    """Ids of the row-level AI calls in the inputs of `select`'s LATERAL VIEWs and of its
    joined sources that are not `sources` (its relations scanned on their own: the others are
    lateral), each reading one of `sources` as `select` names it (not a relation of the same
    name inside the lateral subquery)."""
    out: list[int] = []
    laterals = [j.this for j in select.args.get("joins") or ()]
    laterals += select.args.get("laterals") or ()  # Databricks' LATERAL VIEW
    for source in laterals:
        if alias_of(source) in sources:
            continue
        for call in source.find_all(exp.Anonymous):
            op_id = op_id_of(call)
            if op_id is None or op_id in out or not is_row_level(call):
                continue
            if reads_one(ops[op_id], sources) and not _is_shadowed(call, select, ops[op_id]):
                out.append(op_id)
    return out


def _is_shadowed(call: exp.Expr, select: exp.Select, op: AiOp) -> bool:
    """Whether a SELECT between `call` and `select` has a source of the name the call reads
    (`LATERAL (SELECT AI_X(t.c) FROM t)` reads its own `t`)."""
    read = {b.alias for b in op.bindings}
    node = call.find_ancestor(exp.Select)
    while node is not None and node is not select:
        if read & set(sources_of(node)):
            return True
        node = node.find_ancestor(exp.Select)
    return False
