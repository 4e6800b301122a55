"""IR -> Databricks AI Functions: the spellings every emitter shares (prompts as `concat(...)`,
modelParameters, refusals); each kind's emitter is in quail_engine/sql/functions/<kind>.py."""

from __future__ import annotations

from quail_engine.errors import shorten
from quail_engine.sql.emit import formats
from quail_engine.sql.emit.common import (
    concat,
    dispatch,
    drop_examples,
    lit,
    refuse,
    warn,
)
from quail_engine.sql.ir import AiOp

NAME = "databricks"


def prompt_sql(op: AiOp, args: list[str], prefix: str = "") -> str:
    return concat(op, args, NAME, prefix)


def fail_on_error(fn: str, op: AiOp) -> None:
    if op.options.on_error == "null":
        warn(fn, NAME, "ai_query fails the whole query on an error row where the source "
             "returns NULL")


def model_params(op: AiOp) -> str:
    g = op.options.gen
    items = [(k, v) for k, v in (("max_tokens", g.max_tokens), ("temperature", g.temperature),
                                 ("top_p", g.top_p)) if v is not None]
    if not items:
        return ""
    inner = ", ".join(f"{lit(k, NAME)}, {v}" for k, v in items)
    return f", modelParameters => named_struct({inner})"


def refused(fn: str, why: str):
    def emit(op: AiOp, args: list[str]) -> str:
        raise refuse(fn, NAME, why, op)
    return emit


EMITTERS: dict = {}  # OpKind -> emitter(op, args), filled by quail_engine.sql.functions


def as_labels(op: AiOp, text: str) -> str:
    """A multi-label answer as the ARRAY<STRING> it is in the IR and in BigQuery: ai_classify's
    v2 result is a VARIANT whose `:response` is still a VARIANT, which explode, size and the
    array functions do not take; `from_json(..., 'array<string>')` reads it as the labels
    (https://docs.databricks.com/aws/en/sql/language-manual/functions/from_json), the form the
    Databricks reader strips back to the canonical array."""
    if op.multi and text.endswith(":response"):
        return f"from_json({text}, 'array<string>')"
    return text


def own_format(op: AiOp) -> AiOp:
    """`op` with another warehouse's response format (Snowflake's response_format) as
    ai_query's `responseFormat` JSON schema text (emit/formats.py). ai_gen, written where the
    call names no endpoint, takes none: there the format is dropped, and said so."""
    found = formats.source_format(op)
    if found is None:
        return op
    value = formats.schema(op)
    why = ("ai_gen (no endpoint) takes no responseFormat" if op.options.model is None else
           None if value is not None or found[0] == formats.DATABRICKS else
           "it has no JSON-schema reading")
    if why:
        warn("ai_generate", NAME, f"the {found[0]} {shorten(found[1], 80)} is dropped: "
             f"{why}; the answer is free text")
        return formats.without_format(op)
    if found[0] == formats.DATABRICKS and found in op.task_args:
        return op
    return formats.as_format(op, formats.DATABRICKS, formats.databricks_text(value))


def emit(op: AiOp, args: list[str]) -> str:
    drop_examples(str(op.op), NAME, op)  # no Databricks AI function takes examples
    return as_labels(op, dispatch(EMITTERS, own_format(op), args, NAME))
