"""The AI calls of a dbt project's compiled SQL and how each moves to Quail.

`CompiledNode` is one model, snapshot or test as dbt compiled it; `FoundCall` is one AI call in
it with its IR operator and status: "unchanged" (moves as is), "difference" (moves, with a
documented difference in the answer) or "refused" (does not move; the note says why and names
the documented rewrite where one exists).

Each call is read twice: alone (its own builder, so one refused call does not hide the others)
and as part of the whole statement (`sql.query.parse`, which knows joins and the positions a
call may not take). The statement's reading wins where both succeed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from quail_engine.errors import QuailError, SqlError, shorten
from quail_engine.migrate.differences import assess, refusal
from quail_engine.sql import dialects
from quail_engine.sql.call import Call, as_call, fragment
from quail_engine.sql.ir import AiOp
from quail_engine.sql.prompt import is_prompt_call
from quail_engine.sql.query import parse, read_tree

STATUSES = ("unchanged", "difference", "refused")
# what any of the three vendors' AI calls looks like, before anything is parsed
_AI_TEXT = re.compile(r"(?<![\w.])(?:snowflake\s*\.\s*)?(?:cortex\s*\.\s*\w+|ai_\w+|ai\s*\.\s*\w+"
                      r"|ml\s*\.\s*generate_\w+)\s*\(", re.I)
_COMMENTS_AND_STRINGS = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.|'')*'", re.S)


@dataclass(frozen=True)
class FoundCall:
    node: str             # dbt unique_id, e.g. "model.shop.review_topics"
    path: str             # the node's original file path, relative to the project
    function: str         # the vendor spelling as written, e.g. "AI_CLASSIFY", "AI.IF", "ai_query"
    sql: str              # the call's SQL text (from the compiled SQL)
    op_kind: str | None   # the IR OpKind value, None when refused
    status: str           # "unchanged" | "difference" | "refused"
    note: str             # the documented difference or the refusal reason ("" when unchanged)


@dataclass(frozen=True)
class CompiledNode:
    node: str                 # dbt unique_id
    path: str                 # original file path, relative to the project
    dialect: str              # the warehouse dialect its SQL is written in
    compiled_sql: str | None  # None when it does not compile
    error: str | None         # one line: why it does not compile (None when it does)


@dataclass
class _Site:
    call: Call
    function: str
    sql: str
    op: AiOp | None = None
    error: str | None = None


def looks_like_ai(sql: str) -> bool:
    """True when `sql` (comments and string literals aside) calls something AI-shaped."""
    return _AI_TEXT.search(_COMMENTS_AND_STRINGS.sub(" ", sql)) is not None


def find_calls(node: CompiledNode, resource_type: str = "model") -> list[FoundCall]:
    """Every AI call of `node`'s compiled SQL, in the order written, with its status."""
    sql = node.compiled_sql
    if not sql or not looks_like_ai(sql):
        return []
    try:
        tree = read_tree(sql, node.dialect)
    except SqlError as exc:
        name = _AI_TEXT.search(_COMMENTS_AND_STRINGS.sub(" ", sql)).group(0).rstrip("( \n")
        return [FoundCall(node.node, node.path, name, shorten(sql, 120), None, "refused",
                          f"the SQL does not parse as {node.dialect}: {exc.reason}")]
    sites = _sites(tree, node.dialect)
    statement_ops, statement_error = _statement(sql, node.dialect)
    if statement_error is not None:
        _blame(sites, statement_error)
    found = [_found(node, s, statement_ops, resource_type) for s in sites]
    for op in statement_ops:  # table functions (ML.GENERATE_TEXT, ...) sit outside the walk
        if not any(f.sql in op.origin or op.origin in f.sql for f in found):
            function = op.origin.split("(", 1)[0].strip() or str(op.op)
            status, note = assess(op, function, resource_type)
            found.append(FoundCall(node.node, node.path, function, op.origin,
                                   None if status == "refused" else str(op.op), status, note))
    return found


def _sites(tree: exp.Expr, dialect: str) -> list[_Site]:
    module = dialects.get(dialect)
    sites = []
    for n in tree.walk(bfs=False):
        call = as_call(n, module.NAME)
        if call is None or is_prompt_call(n):
            continue
        builder = module.lookup(call.name)
        if builder is None and not module.is_ai_name(call.name):
            continue
        text = fragment(call.node, module.NAME)
        site = _Site(call, text.split("(", 1)[0].strip(), text)
        if builder is None:
            site.error = f"unknown AI function {call.name} in {module.NAME}"
        else:
            try:
                site.op = module.unwrap(builder(call), n)[2].op
            except QuailError as exc:
                site.error = getattr(exc, "reason", str(exc))
        sites.append(site)
    return sites


def _statement(sql: str, dialect: str) -> tuple[tuple[AiOp, ...], SqlError | None]:
    try:
        return parse(sql, dialect).ai_ops, None
    except SqlError as exc:
        return (), exc


def _blame(sites: list[_Site], error: SqlError) -> None:
    """The statement failed although its calls may read alone: the calls its error quotes (or,
    when it quotes none, every call) are refused with the statement's reason."""
    if any(s.error for s in sites):
        return
    quoted = [s for s in sites if error.fragment and s.sql in error.fragment]
    for s in quoted or sites:
        s.error = error.reason


def _found(node: CompiledNode, site: _Site, statement_ops: tuple[AiOp, ...],
           resource_type: str) -> FoundCall:
    if site.error is not None:
        return FoundCall(node.node, node.path, site.function, site.sql, None, "refused",
                         refusal(site.function, site.error))
    op = next((o for o in statement_ops if site.sql in o.origin), site.op)
    status, note = assess(op, site.function, resource_type)
    return FoundCall(node.node, node.path, site.function, site.sql,
                     None if status == "refused" else str(op.op), status, note)
