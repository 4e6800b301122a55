"""Lowering: find every AI call in a parsed statement, build its IR node, strip the result
wrapper the user wrote, and replace the call by `quail_ai_<id>(<bindings>)` (re-packaged in the
vendor's shape where the wrapper was not stripped). Pure AST -> AST."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sqlglot import exp

from quail_engine.sql import runnable as runnable_forms
from quail_engine.sql import shapes, tvf
from quail_engine.sql.build import AGGREGATE_OPS, Built
from quail_engine.sql.call import as_call, fragment
from quail_engine.sql.errors import (
    ArgumentError,
    UnknownAiFunctionError,
    UnsupportedPositionError,
)
from quail_engine.sql.ir import Binding
from quail_engine.sql.op_kinds import kinds
from quail_engine.sql.placeholder import mark, placeholder_call
from quail_engine.sql.prompt import is_prompt_call
from quail_engine.sql.sources import sources_of

CLAUSES = {exp.Where: "where", exp.Having: "having", exp.Order: "order_by",
           exp.Group: "group_by", exp.Qualify: "qualify"}
REFUSED = {exp.Limit: "LIMIT", exp.Offset: "OFFSET", exp.Values: "VALUES"}


@dataclass
class Lowered:
    tree: exp.Expr
    built: list[Built]


def lower(tree: exp.Expr, dialect_module, *, runnable: bool = True) -> Lowered:
    """Identical AI calls (same IR, same argument SQL) in one SELECT block share one op id, so
    DuckDB matches a call in GROUP BY with the same call in SELECT. Across blocks they stay
    apart: each block's op ids describe only that block's rows. With `runnable`, forms quail
    cannot run (files, embeddings, forecasting, vector search) are refused (sql/runnable.py)."""
    name = dialect_module.NAME
    if runnable:
        runnable_forms.refuse_table_functions(tree, name)
    built = tvf.lower_table_functions(tree, name)
    seen: dict[tuple, int] = {}
    replacements: list[tuple[exp.Expr, int, Built]] = []
    for node, builder, call in _find_sites(tree, dialect_module):
        one = builder(call)
        if call.is_distinct and ("distinct", "true") not in one.op.task_args:
            # (only an aggregate that documents DISTINCT reads it; elsewhere it would be dropped)
            hint = (": aggregate the rows of a SELECT DISTINCT instead"
                    if one.op.op in AGGREGATE_OPS else "")
            raise ArgumentError(f"{call.name} takes no DISTINCT{hint}", fragment(node, name),
                                name)
        outer, _, one = dialect_module.unwrap(one, node)
        if runnable:
            runnable_forms.refuse_op(one, call.name, outer, name)
        context = _context(outer, name)
        if one.op.op in AGGREGATE_OPS and context not in ("select", "having", "order_by"):
            raise UnsupportedPositionError(f"{call.name} is an aggregate and cannot be used in "
                                           f"{context.replace('_', ' ').upper()}",
                                           fragment(outer, name), name)
        op = dataclasses.replace(one.op, context=context, origin=fragment(outer, name),
                                 bindings=_resolve(one, outer))
        one = dataclasses.replace(one, op=op)
        key = (id(outer.find_ancestor(exp.Select)), dataclasses.replace(op, context=""),
               tuple(e.sql() for e in one.exprs))
        if key not in seen:
            seen[key] = len(built)
            one.extra["outer"] = True
            built.append(one)
        replacements.append((outer, seen[key], one))
    for outer, op_id, one in replacements:
        new = shapes.wrap(one.shape, placeholder_call(op_id, [e.copy() for e in one.exprs]))
        mark(new, op_id)
        outer.replace(new)
        found = compared_to(new) if one.op.op in SCORE_OPS else ()
        if found:
            op = built[op_id].op
            merged = tuple(sorted(set(op.thresholds) | set(found)))
            built[op_id] = dataclasses.replace(
                built[op_id], op=dataclasses.replace(op, thresholds=merged))
    return Lowered(tree, built)


SCORE_OPS = kinds(readout="score")  # numbers a comparison in the SQL makes decisions of
_COMPARISONS = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ, exp.NEQ)


def compared_to(node: exp.Expr) -> tuple[float, ...]:
    """The numbers `node` (a score) is compared with where it stands: `node > 0.7`,
    `0.7 <= node`, `node BETWEEN 0.2 AND 0.5` (none: it is not compared with literals)."""
    parent = node.parent
    if isinstance(parent, exp.Paren):
        node, parent = parent, parent.parent
    if isinstance(parent, _COMPARISONS):
        other = parent.expression if parent.this is node else parent.this
        value = _number(other)
        return () if value is None else (value,)
    if isinstance(parent, exp.Between) and parent.this is node:
        bounds = (_number(parent.args.get("low")), _number(parent.args.get("high")))
        return tuple(b for b in bounds if b is not None)
    return ()


def _number(node: exp.Expr | None) -> float | None:
    sign = 1.0
    if isinstance(node, exp.Neg):
        node, sign = node.this, -1.0
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return sign * float(node.this)
        except ValueError:
            return None
    return None


def _find_sites(tree: exp.Expr, module) -> list:
    sites: list = []
    for node in tree.walk(bfs=False):
        call = as_call(node, module.NAME)
        if call is None:
            continue
        if is_prompt_call(node) and not _inside_call(node, module):
            raise UnsupportedPositionError("PROMPT() is only supported as the argument of an AI "
                                           "function", fragment(node, module.NAME), module.NAME)
        builder = module.lookup(call.name)
        if builder is None:
            if module.is_ai_name(call.name):
                raise UnknownAiFunctionError(f"unknown AI function {call.name} in {module.NAME}",
                                             fragment(node, module.NAME), module.NAME)
            continue
        if call.repeated:
            raise ArgumentError(f"{call.name} argument {call.repeated[0]!r} given twice",
                                fragment(node, module.NAME), module.NAME)
        sites.append((node, builder, call))
    nodes = [s[0] for s in sites]
    for node in nodes:
        parent = node.parent
        while parent is not None:
            if any(parent is other for other in nodes):
                raise UnsupportedPositionError(
                    "an AI function cannot take another AI function's result as an argument; "
                    "compute it in a CTE first", fragment(parent, module.NAME), module.NAME)
            parent = parent.parent
    return sites


def _inside_call(node: exp.Expr, module) -> bool:
    parent = node.parent
    while parent is not None:
        call = as_call(parent)
        if call is not None and module.lookup(call.name) is not None:
            return True
        parent = parent.parent
    return False


def _context(node: exp.Expr, dialect: str) -> str:
    child, parent = node, node.parent
    while parent is not None:
        for kind, label in REFUSED.items():
            if isinstance(parent, kind):
                raise UnsupportedPositionError(f"an AI function cannot be used in {label}",
                                               fragment(node, dialect), dialect)
        for kind, label in CLAUSES.items():
            if isinstance(parent, kind):
                return label
        if isinstance(parent, exp.Join) and child.arg_key == "on":
            return "join_on"
        if isinstance(parent, exp.Select) and child.arg_key == "expressions":
            return "select"
        if isinstance(parent, exp.Query):
            return "select"
        child, parent = parent, parent.parent
    return "select"


def _resolve(one: Built, outer: exp.Expr) -> tuple[Binding, ...]:
    """Fill `alias` for bindings that read one relation (unqualified columns belong to the
    enclosing SELECT's only relation, when it has one; a call in a lateral source's input,
    `FROM docs, LATERAL FLATTEN(input => AI_CLASSIFY(body, ...)) f`, reads the others)."""
    select = outer.find_ancestor(exp.Select)
    sources = sources_of(select) if select is not None else {}
    up = outer
    while up is not None and up is not select:
        sources = {a: s for a, s in sources.items() if s is not up}
        up = up.parent
    out = []
    for b, node in zip(one.op.bindings, one.exprs):
        aliases = {c.table or _owner(c.name, sources) for c in node.find_all(exp.Column)}
        alias = aliases.pop() if len(aliases) == 1 else None
        out.append(dataclasses.replace(b, alias=alias))
    return tuple(out)


def _owner(name: str, sources: dict[str, exp.Expr]) -> str | None:
    """The relation an unqualified column `name` belongs to: the only one, or the only one that
    may hold it, where the others' columns are known and do not include it (a lateral FLATTEN's
    SEQ ... THIS, an UNNEST's alias columns: `SELECT AI_CLASSIFY(body, ...), f.value FROM docs,
    LATERAL FLATTEN(input => docs.tags) f` reads docs.body). None when that is not one."""
    if len(sources) == 1:
        return next(iter(sources))
    may = [a for a, source in sources.items()
           if (known := _known_columns(source)) is None or name.lower() in known]
    return may[0] if len(may) == 1 else None


def _known_columns(source: exp.Expr) -> set[str] | None:
    """The columns a lateral or UNNEST source gives, named by its alias (`AS f(seq, ..., this)`,
    `AS t(tag)`); None for any other source (a table's columns are not known here)."""
    if not isinstance(source, exp.Lateral | exp.Unnest):
        return None
    return {c.lower() for c in source.alias_column_names} or None
