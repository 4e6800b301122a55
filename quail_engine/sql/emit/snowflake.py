"""IR -> Snowflake Cortex AISQL: the spellings every emitter shares (prompts as PROMPT(...),
constants, default models); each kind's emitter is in quail_engine/sql/functions/<kind>.py."""

from __future__ import annotations

import json

from quail_engine.errors import shorten
from quail_engine.sql.emit import formats
from quail_engine.sql.emit.common import (
    dispatch,
    lit,
    single,
    warn,
)
from quail_engine.sql.ir import AiOp

NAME = "snowflake"
DEFAULT_MODEL = "llama3.1-8b"
DEFAULT_EMBED = "snowflake-arctic-embed-l-v2.0"


def prompt_sql(op: AiOp, args: list[str]) -> str:
    one = single(op, args, NAME)
    if one is not None:
        return one
    used = sorted({p for p in range(len(args)) if f"{{{p}}}" in op.template})
    return f"PROMPT({', '.join([lit(op.template, NAME), *[args[i] for i in used]])})"


def value_text(v) -> str:
    """A Snowflake constant: OBJECT `{...}`, ARRAY `[...]`, string, number or boolean."""
    if isinstance(v, dict):
        return object_text(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(value_text(x) for x in v) + "]"
    if isinstance(v, str):
        return lit(v, NAME)
    return json.dumps(v).upper() if isinstance(v, bool) else json.dumps(v)


def object_text(values: dict) -> str:
    return "{" + ", ".join(f"{lit(k, NAME)}: {value_text(v)}" for k, v in values.items()) + "}"


def no_model(fn: str, op: AiOp) -> None:
    if op.options.model:
        warn(fn, NAME, f"Snowflake task functions choose their own model; {op.options.model!r} "
             "is dropped")


EMITTERS: dict = {}  # OpKind -> emitter(op, args), filled by quail_engine.sql.functions


def own_format(op: AiOp) -> AiOp:
    """`op` with another warehouse's response format (Databricks' responseFormat) as
    AI_COMPLETE's `response_format` object, the same JSON schema (emit/formats.py); a format
    with no JSON-schema reading is dropped, and said so."""
    found = formats.source_format(op)
    if found is None:
        return op
    if found in op.task_args and found[0] == formats.SNOWFLAKE:
        written = _json_value(found[1])  # DuckDB's response_format := '<JSON text>'
        return op if written is None else formats.as_format(op, formats.SNOWFLAKE,
                                                            value_text(written))
    value = formats.schema(op)
    if value is None:
        warn("AI_COMPLETE", NAME, f"the {found[0]} {shorten(found[1], 80)} has no "
             "JSON-schema reading; dropped, the answer is free text")
        return formats.without_format(op)
    return formats.as_format(op, formats.SNOWFLAKE,
                             object_text({"type": "json", "schema": value}))


def _json_value(text: str) -> object | None:
    """The value of a format written as JSON text, which Snowflake SQL cannot hold as it is
    (its double quotes name identifiers); None for Snowflake's own spelling."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def emit(op: AiOp, args: list[str]) -> str:
    return dispatch(EMITTERS, own_format(op), args, NAME)

