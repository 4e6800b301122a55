"""The AI calls of a dbt project's compiled SQL and how each moves to Quail.

`CompiledNode` is one model, snapshot or test as dbt compiled it; `FoundCall` is one AI call in
it with its IR operator and status: "unchanged" (moves as is), "difference" (moves, with a
documented difference in the answer) or "refused" (does not move; the note says why and names
the documented rewrite where one exists).
"""

from __future__ import annotations

from dataclasses import dataclass

STATUSES = ("unchanged", "difference", "refused")


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
