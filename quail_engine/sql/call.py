"""A function call as the front ends see it: dotted name, positional and named arguments.

The dialect subclasses parse every AI function as `exp.Anonymous` (optionally under `exp.Dot`
for `AI.IF`, `SNOWFLAKE.CORTEX.COMPLETE`), so one reader serves all four dialects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from quail_engine.errors import shorten
from quail_engine.sql.dialects import sqlglot_dialect
from quail_engine.sql.errors import ArgumentError


@dataclass
class Call:
    name: str                                  # upper case, dotted: AI.IF, SNOWFLAKE.CORTEX.SENTIMENT
    node: exp.Expr                             # the call as it sits in the tree (the Dot if dotted)
    args: list[exp.Expr] = field(default_factory=list)
    kwargs: dict[str, exp.Expr] = field(default_factory=dict)   # lower-case names
    is_distinct: bool = False
    dialect: str = ""                          # where it was read (errors quote it in it)
    repeated: list[str] = field(default_factory=list)  # named arguments written twice
    # an option's name in quail's IR -> as the user wrote it (BigQuery's `endpoint` is the
    # model, Snowflake's `task_description` the instruction): messages quote the user's name
    spelled: dict[str, str] = field(default_factory=dict)

    def sql(self, dialect: str) -> str:
        return fragment(self.node, dialect)


@dataclass(frozen=True)
class Signature:
    """Positional parameter names (`required` of them mandatory) and named-only extras. Any
    positional parameter may also be passed by name (`name => value`)."""

    positional: tuple[str, ...]
    required: int
    named: tuple[str, ...] = ()


def fragment(node: exp.Expr, dialect: str) -> str:
    """`node` as SQL for an error message, function names spelled as the user wrote them."""
    return node.sql(dialect=sqlglot_dialect(dialect) if dialect else None,
                    normalize_functions=False)


def _dotted(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Identifier | exp.Var):
        return node.name
    if isinstance(node, exp.Column):
        return ".".join(p.name for p in node.parts)
    if isinstance(node, exp.Dot):
        left, right = _dotted(node.this), _dotted(node.expression)
        return f"{left}.{right}" if left and right else None
    return None


def call_node(node: exp.Expr) -> exp.Expr:
    """The node that stands for the whole call (the enclosing Dot for dotted names)."""
    parent = node.parent
    if isinstance(node, exp.Anonymous) and isinstance(parent, exp.Dot) and parent.expression is node:
        return parent
    return node


def as_call(node: exp.Expr, dialect: str = "") -> Call | None:
    """Read `node` as a call, or None when it is not a (possibly dotted) anonymous function."""
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Anonymous):
        prefix = _dotted(node.this)
        if prefix is None:
            return None
        anon, name = node.expression, f"{prefix}.{node.expression.name}"
    elif isinstance(node, exp.Anonymous) and call_node(node) is node:
        anon, name = node, node.name
    else:
        return None
    call = Call(name=name.upper(), node=node, dialect=dialect)
    for arg in anon.expressions:
        if isinstance(arg, exp.Kwarg | exp.PropertyEQ):
            key = arg.this.name.lower()
            if key in call.kwargs:
                call.repeated.append(key)
            call.kwargs[key] = arg.expression
        elif isinstance(arg, exp.Distinct) and not call.args:
            call.is_distinct = True
            call.args.extend(arg.expressions)
        else:
            call.args.append(arg)
    return call


def bind(call: Call, sig: Signature, dialect: str) -> dict[str, exp.Expr]:
    """Match `call`'s arguments to `sig`; raise ArgumentError naming the function otherwise."""
    fragment = call.sql(dialect)
    if len(call.args) > len(sig.positional):
        raise ArgumentError(f"{call.name} takes at most {len(sig.positional)} positional "
                            f"arguments, got {len(call.args)}", fragment, dialect)
    out = dict(zip(sig.positional, call.args))
    allowed = {p.lower(): p for p in (*sig.positional, *sig.named)}
    for key, value in call.kwargs.items():
        if key not in allowed:
            names = ", ".join(allowed.values())
            raise ArgumentError(f"{call.name} has no argument named {shorten(key, 80)!r} (known: {names})",
                                fragment, dialect)
        if allowed[key] in out:
            raise ArgumentError(f"{call.name} argument {shorten(key, 80)!r} given twice", fragment, dialect)
        out[allowed[key]] = value
    missing = [p for p in sig.positional[:sig.required] if p not in out]
    if missing:
        need = f"{sig.required} argument{'s' if sig.required != 1 else ''}"
        raise ArgumentError(f"{call.name} needs {need} ({', '.join(sig.positional[:sig.required])});"
                            f" missing {', '.join(missing)}", fragment, dialect)
    return out
