"""Logical plan nodes of one core: frozen dataclasses with a stable one-line text form.

The text form nests like function calls, innermost = first to run, e.g.
`ai_filter#1[kv](ai_filter#0(scan(r)))`. Golden tests compare it verbatim.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Protocol

from quail_engine.sql.ir import Equality


class Predicate(Protocol):
    """A relational conjunct as the front end parsed it (`sql.ir.Equality`: a tree, not SQL
    text); `sql` is its text, written for the plan's text form only."""

    @property
    def sql(self) -> str: ...


def _conjoined(predicates) -> str:
    return " AND ".join(p.sql for p in predicates)


class Node(ABC):
    """Base: `children` in order, `with_children` rebuilds, `text` is the one-line form."""

    def children(self) -> tuple[Node, ...]:
        return ()

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return self

    def aliases(self) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for child in self.children():
            out |= child.aliases()
        return out

    @abstractmethod
    def text(self) -> str:
        """The stable one-line form."""


@dataclass(frozen=True)
class Scan(Node):
    """Rows of one relation. `columns` after projection pushdown, `predicates` pushed into it."""

    alias: str
    columns: tuple[str, ...] = ()
    predicates: tuple[Predicate, ...] = ()

    def aliases(self) -> frozenset[str]:
        return frozenset((self.alias,))

    def text(self) -> str:
        extra = ""
        if self.predicates:
            extra += "; where " + _conjoined(self.predicates)
        if self.columns:
            extra += "; cols=" + ",".join(self.columns)
        return f"scan({self.alias}{extra})"


@dataclass(frozen=True)
class Select(Node):
    """A relational predicate over `aliases_used`."""

    input: Node
    predicate: Predicate
    aliases_used: frozenset[str]

    def children(self) -> tuple[Node, ...]:
        return (self.input,)

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return replace(self, input=children[0])

    def text(self) -> str:
        return f"select[{self.predicate.sql}]({self.input.text()})"


@dataclass(frozen=True)
class Cross(Node):
    """Cartesian product (before any rule turns it into a join)."""

    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return replace(self, left=children[0], right=children[1])

    def text(self) -> str:
        return f"cross({self.left.text()}, {self.right.text()})"


@dataclass(frozen=True)
class EquiJoin(Node):
    """Join restricted by equality conjuncts; no prompt runs for pairs they exclude."""

    left: Node
    right: Node
    equi: tuple[Equality, ...]

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return replace(self, left=children[0], right=children[1])

    def text(self) -> str:
        return f"equijoin[{_conjoined(self.equi)}]({self.left.text()}, {self.right.text()})"


@dataclass(frozen=True)
class AiFilter(Node):
    """AI predicate `op` over its input. `doc` names the document it reads (KV sharing key);
    `shares_kv` means an earlier predicate over the same input already encoded that document."""

    input: Node
    op: int
    aliases_used: frozenset[str]
    doc: str = ""
    shares_kv: bool = False

    def children(self) -> tuple[Node, ...]:
        return (self.input,)

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return replace(self, input=children[0])

    def text(self) -> str:
        return f"ai_filter#{self.op}{'[kv]' if self.shares_kv else ''}({self.input.text()})"


@dataclass(frozen=True)
class AiJoin(Node):
    """AI join `op` between two inputs; `equi` restricts candidate pairs; `anchor` is the alias
    whose document KV is computed once (None until join ordering picks it)."""

    left: Node
    right: Node
    op: int
    equi: tuple[Equality, ...] = ()
    anchor: str | None = None

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return replace(self, left=children[0], right=children[1])

    def text(self) -> str:
        attrs = []
        if self.equi:
            attrs.append(_conjoined(self.equi))
        if self.anchor:
            attrs.append(f"anchor={self.anchor}")
        inner = f"[{'; '.join(attrs)}]" if attrs else ""
        return f"ai_join#{self.op}{inner}({self.left.text()}, {self.right.text()})"


@dataclass(frozen=True)
class Project(Node):
    """AI operators of the SELECT list, computed on the core's surviving rows."""

    input: Node
    ops: tuple[int, ...]

    def children(self) -> tuple[Node, ...]:
        return (self.input,)

    def with_children(self, children: tuple[Node, ...]) -> Node:
        return replace(self, input=children[0])

    def text(self) -> str:
        return f"project[{','.join(f'#{o}' for o in self.ops)}]({self.input.text()})"


def transform_up(node: Node, fn) -> Node:
    """Apply `fn` bottom-up (children first), rebuilding only what changed."""
    kids = node.children()
    if kids:
        new_kids = tuple(transform_up(k, fn) for k in kids)
        if any(a is not b for a, b in zip(new_kids, kids)):
            node = node.with_children(new_kids)
    return fn(node)


def walk(node: Node):
    """Pre-order iteration over the tree."""
    yield node
    for child in node.children():
        yield from walk(child)
