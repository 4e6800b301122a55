"""Pieces every dialect module shares: the sqlglot parser tweak, JSON-path wrappers, prompts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sqlglot import exp, parser

from quail_engine.sql.build import Built
from quail_engine.sql.call import fragment
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.prompt import SLOT, Prompt, normalize

AI_TYPED_FUNCTIONS = ("AI_AGG", "AI_CLASSIFY", "AI_EMBED", "AI_GENERATE", "AI_SIMILARITY",
                      "AI_SUMMARIZE_AGG")
TEXT_TYPES = (exp.DType.TEXT, exp.DType.VARCHAR, exp.DType.CHAR, exp.DType.NCHAR,
              exp.DType.NVARCHAR)


def untyped_ai(functions: dict) -> dict:
    """A parser FUNCTIONS table without sqlglot's typed AI_* builders, so every AI call parses
    as `exp.Anonymous` with its arguments as written (named arguments included)."""
    return {k: v for k, v in functions.items() if k not in AI_TYPED_FUNCTIONS}


assert all(k in parser.Parser.FUNCTIONS for k in AI_TYPED_FUNCTIONS)


@dataclass(frozen=True)
class Wrapper:
    """A result wrapper the user wrote around a call: `path` is the JSON path (`labels[0]`),
    `shape` what is left to re-create around the canonical value once it is stripped."""

    path: str
    shape: str | None = None


def json_path_text(path: exp.Expr) -> str | None:
    if not isinstance(path, exp.JSONPath):
        return None
    out = ""
    for part in path.expressions:
        if isinstance(part, exp.JSONPathRoot):
            continue
        if isinstance(part, exp.JSONPathKey):
            out += ("." if out else "") + str(part.this)
        elif isinstance(part, exp.JSONPathSubscript):
            out += f"[{part.this}]"
        else:
            return None
    return out


def _climb_brackets(node: exp.Expr) -> tuple[exp.Expr, str] | None:
    """`node['labels'][0]` (Snowflake/Databricks subscripts) as (outer, 'labels[0]')."""
    outer, path = node, ""
    while isinstance(outer.parent, exp.Bracket) and outer.parent.this is outer:
        keys = outer.parent.expressions
        if len(keys) != 1 or not isinstance(keys[0], exp.Literal):
            return None
        key = keys[0]
        path += (("." if path else "") + key.this) if key.is_string else f"[{key.this}]"
        outer = outer.parent
    return (outer, path) if path else None


def climb_json(node: exp.Expr) -> tuple[exp.Expr, str, bool] | None:
    """(outer node, path, has_text_cast) for `node:path[::STRING]` or `node['path'][0]`."""
    parent = node.parent
    if isinstance(parent, exp.JSONExtract) and parent.this is node:
        path = json_path_text(parent.expression)
        outer = parent
    else:
        outer, path = _climb_brackets(node) or (node, None)
    if path is None:
        return None
    cast = outer.parent
    if isinstance(cast, exp.Cast) and cast.this is outer and cast.to.this in TEXT_TYPES:
        return cast, path, True
    return outer, path, False


def append(prompt: Prompt, node: exp.Expr, sep: str = "\n") -> Prompt:
    """`prompt` followed by one more slot (a FILE argument, ...)."""
    index = len(prompt.exprs)
    return Prompt(f"{prompt.template}{sep}{{{index}}}", (*prompt.exprs, node))


def text_prompt(node: exp.Expr) -> Prompt:
    """One input used as-is (similarity, embedding inputs): a single slot."""
    return Prompt("{0}", (node,))


def as_file(built: Built, node: exp.Expr, modality: str = "image") -> Built:
    """`built` with the slot `node` fills marked as a file (a vendor FILE argument, whatever
    its spelling), so that sql/runnable.py refuses it when the query is to run."""
    key = node.sql()
    bindings = tuple(dataclasses.replace(b, modality=modality) if e.sql() == key else b
                     for b, e in zip(built.op.bindings, built.exprs))
    return dataclasses.replace(built, op=dataclasses.replace(built.op, bindings=bindings))


def joined(prompts: list[Prompt], sep: str = "\n") -> Prompt:
    """Prompts one after the other, `sep` between them, their slots renumbered in order."""
    template: list[str] = []
    exprs: list[exp.Expr] = []
    for p in prompts:
        offset = len(exprs)
        template.append(SLOT.sub(lambda m, k=offset: f"{{{int(m.group(1)) + k}}}", p.template))
        exprs.extend(p.exprs)
    return Prompt(sep.join(template), tuple(exprs))


def text_input(node: exp.Expr, fn: str, dialect: str, origin: exp.Expr | None = None) -> Prompt:
    """A text input (prompt, content) read as a prompt; a number or boolean literal there is
    refused, as the vendors do (their inputs are strings), not asked as text."""
    inner = node.this if isinstance(node, exp.Neg | exp.Paren) else node
    if isinstance(inner, exp.Boolean) or isinstance(inner, exp.Literal) and not inner.is_string:
        raise ArgumentError(f"{fn}: the input must be text, not a number or boolean literal",
                            fragment(origin or node, dialect), dialect)
    return normalize(node, fn, dialect, origin)
