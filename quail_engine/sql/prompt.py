"""Prompt templates: every vendor spelling (PROMPT('..{0}..', a), BigQuery tuples, CONCAT, ||,
a bare column) normalised to one template with `{i}` slots numbered by first use, plus the SQL
expressions that fill them; and rendering a template from row values."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from quail_engine.errors import shorten
from quail_engine.sql.call import fragment
from quail_engine.sql.errors import ArgumentError, PlaceholderError
from quail_engine.sql.ir import AiOp

log = logging.getLogger(__name__)

SLOT = re.compile(r"\{(\d+)\}")


@dataclass(frozen=True)
class Prompt:
    template: str
    exprs: tuple[exp.Expr, ...] = ()


def is_prompt_call(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.upper() == "PROMPT"


def normalize(node: exp.Expr, fn: str, dialect: str, origin: exp.Expr | None = None) -> Prompt:
    """Read a prompt argument; `fn` names the consuming function in errors, which quote
    `origin` (default: the argument)."""
    if is_prompt_call(node):
        return _from_prompt_call(node, fn, dialect, origin or node)
    parts: list[str | exp.Expr] = []
    _flatten(node, parts)
    return _build(parts)


def _from_prompt_call(node: exp.Anonymous, fn: str, dialect: str, origin: exp.Expr) -> Prompt:
    if not node.expressions:
        raise ArgumentError(f"{fn}: PROMPT() needs a template", fragment(origin, dialect), dialect)
    first, args = node.expressions[0], list(node.expressions[1:])
    if not (isinstance(first, exp.Literal) and first.is_string):
        raise ArgumentError(f"{fn}: the PROMPT template must be a string literal, got "
                            f"{shorten(fragment(first, dialect), 80)}", fragment(origin, dialect), dialect)
    parts: list[str | exp.Expr] = []
    pos = 0
    for match in SLOT.finditer(first.this):
        index = int(match.group(1))
        if index >= len(args):
            raise PlaceholderError(f"{fn}: placeholder {{{index}}} has no argument (PROMPT got "
                                   f"{len(args)})", fragment(origin, dialect), dialect)
        parts += [first.this[pos:match.start()], args[index]]
        pos = match.end()
    parts.append(first.this[pos:])
    used = {int(m.group(1)) for m in SLOT.finditer(first.this)}
    if len(used) < len(args):
        log.info("%s: PROMPT arguments %s are not used by the template", fn,
                 sorted(set(range(len(args))) - used))
    return _build(parts)


def _flatten(node: exp.Expr, parts: list[str | exp.Expr]) -> None:
    """The pieces of a CONCAT / || / tuple prompt, in order (iterative: a chain of `||` is a
    left-deep tree as deep as it is long). Only PROMPT() templates hold placeholders: literal
    text that reads like one (`'{0}'`) becomes a bound value, so it reaches the model as
    written and no consumer of the template mistakes it for a slot."""
    todo = [node]
    while todo:
        node = todo.pop()
        if isinstance(node, exp.Paren):
            todo.append(node.this)
        elif isinstance(node, exp.DPipe):
            todo += [node.expression, node.this]
        elif isinstance(node, exp.Concat | exp.Tuple):
            todo += reversed(node.expressions)
        elif isinstance(node, exp.Literal) and not SLOT.search(str(node.this)):
            parts.append(str(node.this))
        else:
            parts.append(node)  # a literal holding `{n}` text is a value, never a placeholder


def _build(parts: list[str | exp.Expr]) -> Prompt:
    template: list[str] = []
    exprs: list[exp.Expr] = []
    keys: dict[str, int] = {}
    for part in parts:
        if isinstance(part, str):
            template.append(part)
            continue
        key = part.sql()
        if key not in keys:
            keys[key] = len(exprs)
            exprs.append(part)
        template.append(f"{{{keys[key]}}}")
    return Prompt("".join(template), tuple(exprs))


def template_parts(template: str) -> list[str | int]:
    """Split a template into literal text and slot indices, e.g. ['Is ', 0, ' good?']."""
    out: list[str | int] = []
    pos = 0
    for match in SLOT.finditer(template):
        if match.start() > pos:
            out.append(template[pos:match.start()])
        out.append(int(match.group(1)))
        pos = match.end()
    if pos < len(template):
        out.append(template[pos:])
    return out


def render_prompt(op: AiOp, values: Sequence[str | None]) -> str:
    """The prompt text for one row: `op.template` with `{i}` replaced by `values[i]`.

    Callers decide what a NULL input means (vendors return NULL); a None here renders as ''.
    """
    if len(values) != len(op.bindings):
        raise ValueError(f"{op.op} has {len(op.bindings)} bindings, got {len(values)} values")
    return SLOT.sub(lambda m: "" if values[int(m.group(1))] is None
                    else str(values[int(m.group(1))]), op.template)
