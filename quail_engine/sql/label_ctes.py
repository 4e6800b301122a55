"""A CTE's classification seen through by the query that filters on its label, for planning.

    WITH critical AS (SELECT r.id, r.body, AI_CLASSIFY(r.body, ...) AS sentiment
                      FROM reviews AS r)
    SELECT c.id, AI_CLASSIFY(c.body, ...) AS complaint
    FROM critical AS c WHERE c.sentiment IN ('negative', 'mixed')

Planned as written, the CTE is one core (every review classified, its KV released) and the
outer query another (the critical reviews encoded again for their second question, well above
the minimum tokens). Seen through, the
outer core reads `reviews AS c` itself and the CTE's classification is a filter of it (its
conjunct as `AiOp.pass_labels`), so each document's KV serves both questions. Only the planning
view changes: DuckDB runs the statement as written and reads the answers by their arguments;
the CTE's own core still runs after it and asks only what the view left unasked.

`see_through(select, ops)` returns the view (a copy of `select`: the CTE's source under the
outer alias, its WHERE added, each reference to its columns replaced by their expressions) and
the ops of the CTE re-bound to the outer alias, or None when the shapes below do not hold: the
source is a subquery or a CTE referenced once (not recursive), a plain SELECT of one table with
no joins, grouping, DISTINCT, LIMIT, windows, aggregates or AI calls in its WHERE; the outer
select filters on one of its single-label classifications with `=`, `<>`, `IN` or `NOT IN`
string literals, has AI operators of its own but no other AI filter of the CTE's rows, and
those read the CTE's columns only as they pass through. (AI filters beside the classification,
in the CTE or outside it, would be ordered freely against it in one core, while the CTE's rows
need the classification whatever those filters answer: such shapes are planned as written.)
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from quail_engine.sql.ir import AiOp, OpKind
from quail_engine.sql.placeholder import op_id_of
from quail_engine.sql.sources import alias_of, is_inner, join_of, sources_of

_BODY_REFUSES = ("joins", "group", "having", "distinct", "limit", "offset", "qualify", "with_",
                 "laterals", "pivots")


def see_through(select: exp.Select, ops: list[AiOp],
                conjuncts) -> tuple[exp.Select, dict[int, AiOp]] | None:
    """(the planning view of `select`, {op id: op re-bound}) or None (module docstring).
    `conjuncts(node)` splits a WHERE into its top-level AND-conjuncts (sql/conjuncts.py)."""
    if not _own_ops(select) or select.find(exp.Exists) is not None:
        return None
    sources = sources_of(select)
    where = select.args.get("where")
    found = conjuncts(where.this if where else None)
    for alias, source in sources.items():
        join = join_of(select, alias)
        if join is not None and not is_inner(join):
            continue
        body = _body(select, source)
        if body is None:
            continue
        outputs, star = _outputs(body)
        labels = {name for name, e in outputs.items() if _is_classify(e, ops)}
        single = len(sources) == 1
        if not labels or not any(_label_column(c, alias, single) in labels for c in found):
            continue
        if where is not None and any(
                (op_id := op_id_of(call)) is not None and set(ops[op_id].aliases) <= {alias}
                for call in where.find_all(exp.Anonymous)):
            continue  # an outer AI filter of the CTE's rows (module docstring)
        inner = alias_of(body.args["from_"].this)
        if not _passes_through(select, alias, outputs, star, ops, single):
            continue
        view = _view(select, alias, body, inner, outputs, star, single)
        if view is None:
            continue
        rebound = {}
        for call in body.find_all(exp.Anonymous):
            op_id = op_id_of(call)
            if op_id is not None:
                rebound[op_id] = _rebind(ops[op_id], inner, alias)
        return view, rebound
    return None


def _own_ops(select: exp.Select) -> bool:
    return any(op_id_of(c) is not None and c.find_ancestor(exp.Select) is select
               for c in select.find_all(exp.Anonymous))


def _body(select: exp.Select, source: exp.Expr) -> exp.Select | None:
    """The plain SELECT behind `source`: a subquery's, or a CTE's referenced only there."""
    if isinstance(source, exp.Subquery):
        body = source.this
    elif isinstance(source, exp.Table) and not source.args.get("db"):
        body = _cte(select, source.name)
    else:
        return None
    if not isinstance(body, exp.Select) or any(body.args.get(k) for k in _BODY_REFUSES):
        return None
    from_ = body.args.get("from_")
    if from_ is None or not isinstance(from_.this, exp.Table):
        return None
    if body.find(exp.AggFunc, exp.Window, exp.Subquery) is not None or any(
            n is not body for n in body.find_all(exp.Select)):
        return None
    where = body.args.get("where")
    if where is not None and any(op_id_of(c) is not None for c in where.find_all(exp.Anonymous)):
        return None  # an AI filter of the CTE (module docstring)
    return body


def _cte(select: exp.Select, name: str) -> exp.Select | None:
    node: exp.Expr | None = select
    while node is not None:
        with_ = node.args.get("with_") if isinstance(node, exp.Query) else None
        for cte in (with_.expressions if with_ else ()):
            if cte.alias_or_name == name:
                if with_.args.get("recursive"):
                    return None
                uses = [t for t in node.find_all(exp.Table)
                        if t.name == name and not t.args.get("db")]
                return cte.this if len(uses) == 1 else None
        node = node.parent
    return None


def _outputs(body: exp.Select) -> tuple[dict[str, exp.Expr], bool]:
    """Output name -> its expression; whether a `*` passes the table's own columns through."""
    out: dict[str, exp.Expr] = {}
    star = False
    for e in body.expressions:
        if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
            star = True
        elif e.alias_or_name:
            out.setdefault(e.alias_or_name, e.unalias())
    return out, star


def _is_classify(e: exp.Expr, ops: list[AiOp]) -> bool:
    op_id = op_id_of(e) if isinstance(e, exp.Anonymous) else None
    if op_id is None:
        return False
    op = ops[op_id]
    return (op.op == OpKind.AI_CLASSIFY and not op.multi and op.output_type == "VARCHAR"
            and len(op.aliases) == 1)


def _label_column(c: exp.Expr, alias: str, single: bool) -> str | None:
    """The column of `alias` a conjunct `col = 'x'` / `<>` / `IN (...)` / `NOT IN` compares to
    string literals, else None."""
    if isinstance(c, exp.Not):
        c = c.this.unnest()
    if isinstance(c, exp.In):
        col, lits = c.this, c.expressions
        if c.args.get("query") or c.args.get("unnest") or c.args.get("field"):
            return None
    elif isinstance(c, exp.EQ | exp.NEQ):
        col, lits = c.this, [c.expression]
        if isinstance(col, exp.Literal):
            col, lits = c.expression, [c.this]
    else:
        return None
    if not isinstance(col, exp.Column) or not lits or not all(
            isinstance(x, exp.Literal) and x.is_string for x in lits):
        return None
    return col.name if (col.table == alias or (not col.table and single)) else None


def _refs(node: exp.Expr, alias: str, single: bool) -> list[exp.Column]:
    return [c for c in node.find_all(exp.Column) if not isinstance(c.this, exp.Star)
            and (c.table == alias or (not c.table and single))]


def _passes_through(select: exp.Select, alias: str, outputs: dict[str, exp.Expr], star: bool,
                    ops: list[AiOp], single: bool) -> bool:
    """Every argument of the outer AI calls that reads `alias` reads a column the CTE passes
    through under its own name (the ops keep their bindings), and no column of a query with
    several sources leaves its relation unnamed."""
    if not single and any(not c.table for c in select.find_all(exp.Column)
                          if not isinstance(c.this, exp.Star)):
        return False
    for call in select.find_all(exp.Anonymous):
        if op_id_of(call) is None or call.find_ancestor(exp.Select) is not select:
            continue
        for col in _refs(call, alias, single):
            e = outputs.get(col.name)
            if e is None and not star:
                return False
            if e is not None and not (isinstance(e, exp.Column) and e.name == col.name):
                return False
    return True


def _requalify(node: exp.Expr, inner: str, alias: str) -> exp.Expr:
    for col in list(node.find_all(exp.Column)):
        if not isinstance(col.this, exp.Star) and col.table in (inner, ""):
            col.set("table", exp.to_identifier(alias))
    return node


def _view(select: exp.Select, alias: str, body: exp.Select, inner: str,
          outputs: dict[str, exp.Expr], star: bool, single: bool) -> exp.Select | None:
    view = select.copy()
    view.parent = select.parent  # the CTEs visible to it stay visible (scan._ctes_needed)
    for col in _refs(view, alias, single):
        e = outputs.get(col.name)
        if e is not None:
            col.replace(_requalify(e.copy(), inner, alias))
        elif star:
            col.set("table", exp.to_identifier(alias))
        else:
            return None  # not a column of the CTE: DuckDB reports it, from the statement
    source = sources_of(view)[alias]
    table = body.args["from_"].this.copy()
    table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    source.replace(table)
    where = body.args.get("where")
    if where is not None:
        view.where(_requalify(where.this.copy(), inner, alias), copy=False)
    return view


def _rebind(op: AiOp, inner: str, alias: str) -> AiOp:
    bindings = []
    for b in op.bindings:
        if b.alias == inner or (b.alias is None and b.column is not None):
            node = _requalify(b.node.copy(), inner, alias)
            b = dataclasses.replace(b, alias=alias, sql=node.sql(dialect="duckdb"), node=node)
        bindings.append(b)
    return dataclasses.replace(op, bindings=tuple(bindings))
