"""The migration report: one row per AI call (and per node that does not compile), a summary
line, and the exit status.

Exit status: 0 when every call moves (unchanged or with a documented difference), 1 when a call
is refused or a node does not compile (so CI can gate on it); bad input is exit 2 before this.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from quail_engine.migrate.calls import CompiledNode, FoundCall, find_calls

STATUS_TEXT = {"unchanged": "moves unchanged", "difference": "moves, differs",
               "refused": "refused"}
HEADER = ("node", "function", "IR operator", "status", "note")


@dataclass(frozen=True)
class Migration:
    dialect: str
    source: str                       # where the dialect came from, in words
    nodes: tuple[CompiledNode, ...]
    calls: tuple[FoundCall, ...]

    @property
    def broken(self) -> tuple[CompiledNode, ...]:
        return tuple(n for n in self.nodes if n.compiled_sql is None)

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.calls)

    def exit_status(self) -> int:
        return 1 if self.count("refused") or self.broken else 0


def node_label(unique_id: str) -> str:
    """`model.shop.review_topics` -> `review_topics`; other kinds keep their kind:
    `test:not_null_x`, `snapshot:orders_snapshot`."""
    kind, _, rest = unique_id.partition(".")
    name = rest.split(".", 1)[1] if "." in rest else rest
    return name if kind == "model" else f"{kind}:{name}"


def rows(migration: Migration) -> list[tuple[str, ...]]:
    out = [(node_label(c.node), c.function, c.op_kind or "-", STATUS_TEXT[c.status], c.note)
           for c in migration.calls]
    out += [(node_label(n.node), "-", "-", "does not compile", n.error or "")
            for n in migration.broken]
    return out


def render(migration: Migration) -> list[str]:
    """The table (columns aligned, the note last and whole) and the summary line."""
    table = [HEADER, *rows(migration)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)) + "  " + r[-1]
             for r in table] if len(table) > 1 else []
    return [line.rstrip() for line in lines] + [summary(migration)]


def summary(m: Migration) -> str:
    sql_nodes = [n for n in m.nodes if n.compiled_sql is not None]
    with_calls = {c.node for c in m.calls}
    parts = [f"{m.count('unchanged')} move{_s(m.count('unchanged'), 's', '')} unchanged",
             f"{m.count('difference')} move{_s(m.count('difference'), 's', '')} with a "
             "documented difference",
             f"{m.count('refused')} {_s(m.count('refused'), 'is', 'are')} refused"]
    text = (f"{len(m.calls)} AI call{_s(len(m.calls))} in {len(with_calls)} of {len(m.nodes)} "
            f"node{_s(len(m.nodes))} ({m.dialect}, {m.source}): {', '.join(parts)}")
    if m.broken:
        text += f"; {len(m.broken)} node{_s(len(m.broken))} {_s(len(m.broken), 'does', 'do')} "
        text += "not compile"
    if not m.calls and sql_nodes:
        text += "; nothing to move"
    return text + "."


def _s(n: int, one: str = "", many: str = "s") -> str:
    return one if n == 1 else many


def calls_of(nodes: Sequence[CompiledNode], kinds: dict[str, str]) -> tuple[FoundCall, ...]:
    return tuple(c for n in nodes for c in find_calls(n, kinds.get(n.node, "model")))
