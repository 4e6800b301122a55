"""What changes when a warehouse AI call runs on Quail: the documented differences and
refusals of docs/migrate.md ("What moves, and how"), one rule per operator kind.

`assess(op, function, resource_type)` gives a call's status and note; `refusal(function,
reason)` adds the documented rewrite to a refusal's reason where one exists.
"""

from __future__ import annotations

from quail_engine.exec.facade import DEFAULT_MAX_TOKENS
from quail_engine.sql.ir import AiOp
from quail_engine.sql.op_kinds import OpKind, spec

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
# kind -> its refusal as docs/migrate.md words it (else the kind's OpSpec.refusal)
REFUSED_KINDS = {
    OpKind.AI_EMBED: ("Quail ships no embedding model: ai_embed is refused when the query is "
                      "read; no rewrite (compute embeddings outside the model)"),
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
        return "refused", REFUSED_KINDS.get(op.op, refusal)
    notes = [n for n in (_model_note(op), *_kind_notes(op, function.upper())) if n]
    return ("difference", "; ".join(notes)) if notes else ("unchanged", "")


def _model_note(op: AiOp) -> str:
    if not op.options.model:
        return ""
    return f"names the model {op.options.model!r}: the profile's model answers instead"


def _kind_notes(op: AiOp, function: str) -> list[str]:
    kind = op.op
    if kind == OpKind.AI_CLASSIFY and op.multi:
        return ["multi-label: one decision per label over the same document (on the default "
                "model a likelihood threshold chosen on labelled data), not the vendor's model"]
    if kind == OpKind.AI_SCORE and op.task == "sentiment":
        return ["2 * P(the text is positive) - 1 in -1..1, from one yes/no prefill, not "
                "Snowflake's sentiment model"]
    if kind == OpKind.AI_SCORE:
        scale = dict(op.task_args).get("range")
        where = f"placed on the {scale.replace('..', '-')} scale the prompt states" if scale \
            else "in 0..1 (the prompt states no scale)"
        return [f"the probability of a yes answer {where}, not a number the model writes"]
    if kind == OpKind.AI_SIMILARITY:
        return ["the model's PMI of the two texts, each read after the other (the same value "
                "whichever comes first; two prompts a row), through a logistic curve onto the "
                "vendor's range, not the cosine of two embeddings"]
    if kind in (OpKind.AI_GENERATE, OpKind.AI_EXTRACT):
        limit = op.options.gen.max_tokens or DEFAULT_MAX_TOKENS
        notes = [f"greedy decoding, at most {limit} new tokens (the profile's max_new_tokens "
                 "caps it)"]
        if op.options.gen.temperature or op.options.gen.top_p:
            notes.append("temperature and top_p are ignored")
        if kind == OpKind.AI_EXTRACT:
            notes.append("the JSON is decoded under the fields' schema; an answer not complete "
                         "within its tokens is NULL")
        return notes
    if kind == OpKind.AI_AGGREGATE:
        return ["a group past the model's context is summarized in chunks, then from the "
                "chunks' answers (map-reduce with the call's own instruction)"]
    if kind == OpKind.AI_COUNT_TOKENS:
        return ["counts the tokens of the profile's model, not the warehouse model's"]
    return []
