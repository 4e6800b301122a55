"""The AI calls of a core's SELECT that DuckDB asks of every row (or group), outside the
select list (ORDER BY, QUALIFY, HAVING, a WHERE call that is no conjunct of it), and the checks
that decide whether a call reads values of one row of the core's relations: such calls are the
core's projections (sql/cores.py)."""

from __future__ import annotations

from sqlglot import exp

from quail_engine.sql.ir import AiOp
from quail_engine.sql.placeholder import op_id_of
from quail_engine.sql.scan import is_literal

ROW_CLAUSES = ("where", "order", "qualify", "having")


def row_calls(select: exp.Select, aliases: set[str]) -> list[int]:
    """AI calls of `select` outside its select list that DuckDB would ask of every row (or
    group) the core's filters leave: in ORDER BY, QUALIFY, HAVING, and in WHERE where they are
    no conjunct of it (inside a CASE, compared with a value). They are planned as projections
    over the core's rows, so they run batched and cost-ordered like the select list's, and the
    statement reads their answers. A call under OR is left to DuckDB, which asks it only of
    the rows the other side leaves undecided (answered on the fly, a DuckDB vector at a
    time)."""
    out = []
    for key in ROW_CLAUSES:
        clause = select.args.get(key)
        if clause is None:
            continue
        for call in clause.find_all(exp.Anonymous):
            op_id = op_id_of(call)
            if op_id is None or call.find_ancestor(exp.Select) is not select:
                continue
            if key in ("where", "having", "qualify") and _under_or(call, clause):
                continue
            if is_row_level(call) and not reads_alias(call, aliases):
                out.append(op_id)
    return out


def reads_alias(call: exp.Expr, aliases: set[str]) -> bool:
    """Whether an argument names a select-list alias (`ORDER BY AI_FILTER(b)` with `body AS
    b`): only DuckDB resolves it, the relation's scan has no such column."""
    return any(not c.table and c.name in aliases for c in call.find_all(exp.Column))


def is_row_level(call: exp.Expr) -> bool:
    """Whether an AI call's arguments are values of one row: one that reads an aggregate or
    a window (a group's LISTAGG) has values only DuckDB forms, so it is left to DuckDB (its
    scan would aggregate the whole relation)."""
    return next((n for n in call.find_all(exp.AggFunc, exp.Window) if n is not call), None) \
        is None


def _under_or(node: exp.Expr, clause: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None and parent is not clause:
        if isinstance(parent, exp.Or):
            return True
        parent = parent.parent
    return False


def reads_one(op: AiOp, sources) -> bool:
    """Reads one of the core's relations: a row clause's call over two relations is asked
    by DuckDB only of the pairs its joins form, which a projection over the core's relations
    would not know (it is left to DuckDB)."""
    read = {b.alias for b in op.bindings if not is_literal(b)}
    return len(read) == 1 and read <= set(sources)


def reads_only(op: AiOp, sources) -> bool:
    """Reads some column, and only the core's relations."""
    read = [b for b in op.bindings if not is_literal(b)]
    return bool(read) and all(b.alias in sources for b in read)
