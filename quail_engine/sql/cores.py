"""Cores: the SELECT blocks that hold AI operators, with what the planner needs to precompute
their answers: the relations (each with a pushed-down scan query), the AI filters and joins that
are top-level AND-conjuncts of WHERE / inner-join ON, and the AI projections.

A conjunct `NOT <AI predicate>` (Snowflake's `NOT AI_FILTER(...)`, Databricks' `= 'FALSE'`) is
planned like the predicate itself, with the op marked `negated`: the same prompt (so the same
answers and document KV), rows answering FALSE pass. AI predicates under OR or in an outer
join's ON stay out of `filters`/`joins`: DuckDB still evaluates them through
`quail_ai_<id>(...)` in `duckdb_sql`, they are just not planned. Calls DuckDB asks of every
row or group outside the select list (ORDER BY, QUALIFY, HAVING, a WHERE call that is no
conjunct of it) are the core's projections (`_row_calls`).

A conjunct comparing a single-label classification to string literals (`= 'x'`, `<>`, `IN`,
`NOT IN`) is planned as a filter of it, its passing labels in `AiOp.pass_labels`; a CTE's
classification that the outer query filters on is planned inside the outer core
(sql/label_ctes.py), its ops re-bound in `Core.ops`.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from quail_engine.sql.build import AGGREGATE_OPS
from quail_engine.sql.ir import AiOp, Equality, JoinInfo, OpKind
from quail_engine.sql.label_ctes import see_through
from quail_engine.sql.placeholder import op_id_of, placeholder_id, placeholder_ids
from quail_engine.sql.scan import Pending, is_literal, scan_relation
from quail_engine.sql.sources import is_inner, sources_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Relation:
    """One input of a core. `scan` is a complete DuckDB query (a sqlglot tree built from the
    statement's nodes, sql/scan.py) returning this relation's candidate rows after the
    relational conjuncts that touch only it, with exactly `columns`: `b_<op>_<i>` (binding i
    of op) and `k_<n>` (side of equality conjunct n). `scan_sql` is its DuckDB text, written
    from the tree once: what DuckDB runs and explain shows. A scan that calls AI functions
    itself (a CTE's or a subquery's AI projection) is rewritten to the statement's function
    names from the tree (`exec.udfs.prepare_scan`), never from the text. `scan` is None in a
    relation built by hand (tests), which has its text alone."""

    alias: str
    scan_sql: str
    columns: tuple[str, ...]
    scan: exp.Select | None = field(default=None, compare=False, repr=False,
                                    metadata={"tree": True})

    def calls(self) -> frozenset[int]:
        """The op ids of the AI calls the scan makes itself, read off its tree (off the text
        of a relation built by hand)."""
        if self.scan is None:
            return frozenset(placeholder_ids(self.scan_sql))
        return frozenset(i for n in self.scan.find_all(exp.Anonymous)
                         if (i := placeholder_id(n.name)) is not None)


@dataclass(frozen=True)
class EquiKey:
    """Equality conjunct `n` of ai_join `join` (`equality`, its tree; `left` is the join's
    left relation): column `k_<n>` of both sides' scans."""

    join: int
    n: int
    equality: Equality

    @property
    def left(self) -> str:
        return self.equality.left

    @property
    def right(self) -> str:
        return self.equality.right

    def to_json(self) -> dict[str, Any]:
        """`quail explain`'s form: the conjunct as its DuckDB text."""
        return {"join": self.join, "n": self.n, "left": self.left, "right": self.right,
                "sql": self.equality.sql}


@dataclass(frozen=True)
class Core:
    relations: tuple[Relation, ...]
    filters: tuple[int, ...]
    joins: tuple[int, ...]
    projections: tuple[int, ...]
    aggregates: tuple[int, ...] = ()
    keys: tuple[EquiKey, ...] = ()
    # ops this core plans differently from the statement's (a CTE's classification seen
    # through: re-bound to the outer alias, with its pass labels): (op id, op)
    ops: tuple[tuple[int, AiOp], ...] = ()

    def ops_of(self, ai_ops) -> list[AiOp]:
        """The statement's ops as this core plans them."""
        out = list(ai_ops)
        for op_id, op in self.ops:
            out[op_id] = op
        return out

    def to_text(self) -> str:
        rels = ", ".join(f"{r.alias}[{', '.join(r.columns)}]" for r in self.relations)
        return (f"core(relations=[{rels}]; filters={list(self.filters)}; joins="
                f"{list(self.joins)}; projections={list(self.projections)}"
                + (f"; aggregates={list(self.aggregates)}" if self.aggregates else "")
                + (f"; seen_through={[i for i, _ in self.ops]}" if self.ops else "") + ")")


def conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    """Top-level AND-conjuncts in order (iterative: long AND chains are deep trees)."""
    out: list[exp.Expr] = []
    todo = [] if node is None else [node]
    while todo:
        node = todo.pop().unnest()
        if isinstance(node, exp.And):
            todo += [node.expression, node.this]
        else:
            out.append(node)
    return out


def extract_cores(tree: exp.Expr, ops: list[AiOp]) -> tuple[list[Core], list[AiOp]]:
    """All cores of `tree` (a lowered statement), and `ops` with ai_join kinds filled in."""
    ops = list(ops)
    absorbed: set[int] = set()
    cores = []
    for select in tree.find_all(exp.Select):
        if id(select) in absorbed:
            continue
        seen = see_through(select, ops, conjuncts)
        if seen is None:
            core = _extract(select, ops, absorbed)
        else:
            core = _seen_through(*seen, ops, absorbed)
        if core is not None:
            cores.append(core)
    _mark_unplanned_joins(tree, ops)
    return cores, ops


def _extract(select: exp.Select, ops: list[AiOp], absorbed: set[int]) -> Core | None:
    pending = Pending(select=select, sources=_scannable(select), ops=ops)
    if not pending.sources:
        return None
    _predicates(pending, absorbed)
    aliases = {e.alias for e in select.expressions if e.alias}
    for node in select.expressions:
        for call in node.find_all(exp.Anonymous):
            op_id = op_id_of(call)
            if op_id is None or call.find_ancestor(exp.Select) is not select:
                continue
            aggregate = ops[op_id].op in AGGREGATE_OPS
            if not aggregate and not _row_level(call) or _reads_alias(call, aliases):
                continue
            target = pending.aggregates if aggregate else pending.projections
            if _reads_only(ops[op_id], pending.sources) and op_id not in target \
                    and op_id not in pending.filters:
                target.append(op_id)
    for op_id in _row_calls(select, aliases):
        if op_id not in (*pending.filters, *pending.joins, *pending.projections) and \
                ops[op_id].op not in AGGREGATE_OPS and _reads_one(ops[op_id], pending.sources):
            pending.projections.append(op_id)
    if pending.filters or pending.joins or pending.projections or pending.aggregates:
        return _core(pending)
    return None


def _seen_through(view: exp.Select, rebound: dict[int, AiOp], ops: list[AiOp],
                  absorbed: set[int]) -> Core | None:
    """The core of a planning view (label_ctes.see_through): extracted over the ops with the
    CTE's re-bound; what extraction sets on the outer ops (join kinds, NOT) reaches the
    statement's ops, the CTE's ops stay the core's own."""
    local = list(ops)
    for op_id, op in rebound.items():
        local[op_id] = op
    core = _extract(view, local, absorbed)
    if core is None:
        return None
    for op_id in range(len(ops)):
        if op_id not in rebound:
            ops[op_id] = local[op_id]
    used = {*core.filters, *core.joins, *core.projections, *core.aggregates}
    return dataclasses.replace(core, ops=tuple((i, local[i]) for i in sorted(rebound)
                                               if i in used))


def _scannable(select: exp.Select) -> dict[str, exp.Expr]:
    """Relations that can be scanned on their own (tables, subqueries); LATERAL / UNNEST
    sources depend on another relation's row, so AI ops reading them are not planned."""
    return {a: s for a, s in sources_of(select).items() if isinstance(s, exp.Table | exp.Subquery)
            and not isinstance(s.this, exp.Unnest)}


ROW_CLAUSES = ("where", "order", "qualify", "having")


def _row_calls(select: exp.Select, aliases: set[str]) -> list[int]:
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
            if _row_level(call) and not _reads_alias(call, aliases):
                out.append(op_id)
    return out


def _reads_alias(call: exp.Expr, aliases: set[str]) -> bool:
    """Whether an argument names a select-list alias (`ORDER BY AI_FILTER(b)` with `body AS
    b`): only DuckDB resolves it, the relation's scan has no such column."""
    return any(not c.table and c.name in aliases for c in call.find_all(exp.Column))


def _row_level(call: exp.Expr) -> bool:
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


def _reads_one(op: AiOp, sources) -> bool:
    """Reads one of the core's relations: a row clause's call over two relations is asked
    by DuckDB only of the pairs its joins form, which a projection over the core's relations
    would not know (it is left to DuckDB)."""
    read = {b.alias for b in op.bindings if not is_literal(b)}
    return len(read) == 1 and read <= set(sources)


def _reads_only(op: AiOp, sources) -> bool:
    read = [b for b in op.bindings if not is_literal(b)]
    return bool(read) and all(b.alias in sources for b in read)


def _predicates(p: Pending, absorbed: set[int]) -> None:
    where = p.select.args.get("where")
    found = conjuncts(where.this if where else None)
    exists = [c for c in found if isinstance(c, exp.Exists)
              or (isinstance(c, exp.Not) and isinstance(c.this, exp.Exists))]
    for c in found:
        if not any(c is e for e in exists):
            _conjunct(p, c, None)
    for join in p.select.args.get("joins") or ():
        for c in conjuncts(join.args.get("on")):
            _conjunct(p, c, join)
    for c in exists:
        _exists(p, c, absorbed)


def _conjunct(p: Pending, c: exp.Expr, join: exp.Join | None, inner_alias: str | None = None,
              kind: str = "inner") -> None:
    c = _is_true(c)
    if inner_alias is None and is_inner(join) and _label_filter(p, c):
        return
    default = inner_alias or (next(iter(p.sources)) if len(p.sources) == 1 else None)
    negated = _negated_id(c) is not None
    op_id = _negated_id(c) if negated else _predicate_id(c)
    if op_id is not None and p.ops[op_id].output_type == "BOOLEAN" and (join is None
                                                                        or is_inner(join)):
        aliases = _aliases_in_order(p.ops[op_id], p.sources)
        if aliases is None:
            return
        if negated:
            p.ops[op_id] = dataclasses.replace(p.ops[op_id], negated=True)
        if len(aliases) == 1:
            p.filters.append(op_id)
        elif len(aliases) == 2:
            if inner_alias is not None:
                left = tuple(a for a in aliases if a != inner_alias)
                right = (inner_alias,)
            else:
                left, right = aliases[:1], aliases[1:]
            p.joins.append(op_id)
            p.ops[op_id] = dataclasses.replace(p.ops[op_id], op=OpKind.AI_JOIN,
                                               join=JoinInfo(kind, left, right))
        return
    if op_id is None and not any(op_id_of(n) is not None for n in c.find_all(exp.Anonymous)):
        p.relational.append((c, join, default))


def _label_filter(p: Pending, c: exp.Expr) -> bool:
    """Plans `<classification> = 'x'` (`<>`, `IN (...)`, `NOT IN`) as a filter: its passing
    labels, over the op's label names, in `pass_labels` (two conjuncts on one op intersect)."""
    negated = isinstance(c, exp.Not)
    node = c.this.unnest() if negated else c
    if isinstance(node, exp.In) and not any(node.args.get(k) for k in ("query", "unnest",
                                                                        "field")):
        call, lits = node.this, node.expressions
    elif isinstance(node, exp.EQ | exp.NEQ):
        call, lits = node.this, [node.expression]
        if isinstance(call, exp.Literal):
            call, lits = node.expression, [node.this]
        negated ^= isinstance(node, exp.NEQ)
    else:
        return False
    op_id = _predicate_id(call)
    if op_id is None or not lits or not all(isinstance(x, exp.Literal) and x.is_string
                                            for x in lits):
        return False
    op = p.ops[op_id]
    if op.op != OpKind.AI_CLASSIFY or op.multi or op.output_type != "VARCHAR" or not op.labels:
        return False
    aliases = _aliases_in_order(op, p.sources)
    if aliases is None or len(aliases) != 1:
        return False
    named = {x.this for x in lits}
    names = [lb.name for lb in op.labels]
    passing = [n for n in names if (n in named) != negated]
    if op.pass_labels is not None:
        passing = [n for n in passing if n in op.pass_labels]
    p.ops[op_id] = dataclasses.replace(op, pass_labels=tuple(passing))
    if op_id not in p.filters:
        p.filters.append(op_id)
    return True


def _predicate_id(c: exp.Expr) -> int | None:
    """The op id when the conjunct is a bare placeholder call (`NOT` is read by the caller)."""
    return op_id_of(c) if isinstance(c, exp.Anonymous) else None


def _negated_id(c: exp.Expr) -> int | None:
    """The op id of `NOT pred` or `NOT (pred = TRUE)` (not `NOT (pred IS TRUE)`: that one holds
    for a NULL answer, which no planned filter keeps)."""
    if not isinstance(c, exp.Not):
        return None
    inner = c.this.unnest()
    if isinstance(inner, exp.EQ):
        inner = _is_true(inner)
    return _predicate_id(inner)


def _is_true(c: exp.Expr) -> exp.Expr:
    """`pred = TRUE` and `pred IS TRUE` are `pred` as a conjunct."""
    if isinstance(c, exp.EQ | exp.Is) and isinstance(c.expression, exp.Boolean) and \
            c.expression.this and _predicate_id(c.this) is not None:
        return c.this
    return c


def _aliases_in_order(op: AiOp, sources) -> tuple[str, ...] | None:
    used = {b.alias for b in op.bindings if not is_literal(b)}
    if not used or None in used or not used <= set(sources):
        log.info("%s is not planned: its bindings do not name the core's relations", op.op)
        return None
    return tuple(a for a in sources if a in used)


def _exists(p: Pending, c: exp.Expr, absorbed: set[int]) -> None:
    is_anti = isinstance(c, exp.Not)
    query = (c.this if is_anti else c).this
    if not isinstance(query, exp.Select) or query.args.get("joins") or any(
            query.args.get(k) for k in ("group", "having", "limit", "qualify", "with_")):
        _conjunct(p, c, None)
        return
    inner = sources_of(query)
    if len(inner) != 1 or set(inner) & set(p.sources):
        _conjunct(p, c, None)
        return
    inner_alias, source = next(iter(inner.items()))
    outer_sources = p.sources
    p.sources = {**p.sources, inner_alias: source}
    before_joins, before_filters = len(p.joins), len(p.filters)
    where = query.args.get("where")
    kind = "anti" if is_anti else "semi"
    rel_before = len(p.relational)
    for conj in conjuncts(where.this if where else None):
        _conjunct(p, conj, None, inner_alias=inner_alias, kind=kind)
    new_joins = p.joins[before_joins:]
    if not new_joins:
        p.sources, p.joins, p.filters = outer_sources, p.joins[:before_joins], p.filters[:before_filters]
        del p.relational[rel_before:]
        _conjunct(p, c, None)  # a plain (NOT) EXISTS is a relational conjunct, pushable if local
        return
    p.semi[inner_alias] = source
    absorbed.add(id(query))


def _core(p: Pending) -> Core:
    keys: list[EquiKey] = []
    for op_id in p.joins:
        join = p.ops[op_id].join
        equi = []
        for c, _, default in p.relational:
            sides = _equi_sides(c, p.sources, default)
            if sides and {sides[0][0], sides[1][0]} == {join.left[0], join.right[0]}:
                n = len(keys)
                left, right = sides if sides[0][0] == join.left[0] else sides[::-1]
                p.keys.append((n, left, right))
                equality = Equality(join.left[0], join.right[0], c.copy())
                keys.append(EquiKey(op_id, n, equality))
                equi.append(equality)
        p.ops[op_id] = dataclasses.replace(p.ops[op_id],
                                           join=dataclasses.replace(join, equi=tuple(equi)))
    relations = tuple(scan_relation(p, alias) for alias in p.sources)
    return Core(relations, tuple(p.filters), tuple(p.joins), tuple(p.projections),
                tuple(p.aggregates), tuple(keys))


def _equi_sides(c: exp.Expr, sources, default: str | None):
    if not isinstance(c, exp.EQ):
        return None
    out = []
    for side in (c.this, c.expression):
        tables = {col.table or default for col in side.find_all(exp.Column)}
        if len(tables) != 1 or None in tables or next(iter(tables)) not in sources:
            return None
        out.append((next(iter(tables)), side))
    return (out[0], out[1]) if out[0][0] != out[1][0] else None


def _mark_unplanned_joins(tree: exp.Expr, ops: list[AiOp]) -> None:
    """Boolean AI predicates in WHERE/ON that read two relations are ai_join even when unplanned
    (under OR, in an outer join's ON)."""
    for i, op in enumerate(ops):
        aliases = [a for a in dict.fromkeys(b.alias for b in op.bindings) if a is not None]
        if op.op != OpKind.AI_FILTER or op.context not in ("where", "join_on") or len(aliases) < 2:
            continue
        kind = "inner"
        for call in tree.find_all(exp.Anonymous):
            join = call.find_ancestor(exp.Join)
            if op_id_of(call) == i and join is not None and not is_inner(join):
                kind = (join.side or "inner").lower()
        ops[i] = dataclasses.replace(op, op=OpKind.AI_JOIN,
                                     join=JoinInfo(kind, tuple(aliases[:1]), tuple(aliases[1:])))

