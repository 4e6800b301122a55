"""What changes when a warehouse AI call runs on Quail: the documented differences and
refusals of docs/migrate.md ("What moves, and how"). Each operator kind's own difference
and refusal wording sit with its vendor spellings (sql/functions/<kind>.py `NOTES`,
`REFUSAL_NOTE`); what holds for every kind (a named model, snapshots, rewrites) is here.

`assess(op, function, resource_type)` gives a call's status and note; `refusal(function,
reason)` adds the documented rewrite to a refusal's reason where one exists.
"""

from __future__ import annotations

from quail_engine.exec.facade import DEFAULT_MAX_TOKENS
from quail_engine.sql import functions
from quail_engine.sql.ir import AiOp
from quail_engine.sql.op_kinds import spec

# dbt's snapshot materialization runs the snapshot's SELECT straight on DuckDB (its columns
# first), not through quail: checked with dbt-duckdb 1.11 (docs/migrate.md)
SNAPSHOT_REFUSAL = ("a dbt snapshot's SELECT runs straight on DuckDB on type: quail, so its AI "
                    "calls do not run; rewrite: compute the AI columns in a table model and "
                    "snapshot that model")

# function (upper case, as written) -> the documented rewrite of its refusal
REWRITES = {
    "AI_SENTIMENT": "one AI_CLASSIFY per aspect, e.g. AI_CLASSIFY(PROMPT('Sentiment about price "
                    "in: {0}', text), ['positive', 'negative', 'neutral', 'mixed'])"
                    ":labels[0]::string",
    "SNOWFLAKE.CORTEX.COMPLETE": "end the conversation with the user's message, or write it "
                                 "into one prompt: AI_COMPLETE(model, PROMPT('...{0}...', ...))",
    "SNOWFLAKE.CORTEX.TRY_COMPLETE": "end the conversation with the user's message, or write it "
                                     "into one prompt: AI_COMPLETE(model, PROMPT('...{0}...', "
                                     "...))",
    "AI_PARSE_DOCUMENT": "parse the documents before dbt and load their text as a column",
}


def refusal(function: str, reason: str) -> str:
    """`reason`, followed by the documented rewrite for `function` when there is one."""
    rewrite = REWRITES.get(function.upper())
    return f"{reason}; rewrite: {rewrite}" if rewrite else reason


def assess(op: AiOp, function: str, resource_type: str = "model") -> tuple[str, str]:
    """(status, note) of a call that parses: "unchanged" with an empty note, "difference" with
    the documented difference(s), or "refused" with the reason and rewrite. Data tests are
    judged as models are (quail runs a test's AI SQL first and tests its result); snapshots
    are refused."""
    if resource_type == "snapshot":
        return "refused", SNAPSHOT_REFUSAL
    refusal = spec(op.op).refusal
    if refusal is not None:
        return "refused", functions.REFUSAL_NOTES.get(op.op, refusal)
    notes = [n for n in (_model_note(op), *_kind_notes(op)) if n]
    return ("difference", "; ".join(notes)) if notes else ("unchanged", "")


def _model_note(op: AiOp) -> str:
    if not op.options.model:
        return ""
    return f"names the model {op.options.model!r}: the profile's model answers instead"


def _kind_notes(op: AiOp) -> list[str]:
    notes = functions.NOTES.get(op.op)
    return notes(op, DEFAULT_MAX_TOKENS) if notes else []
