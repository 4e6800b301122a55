"""IR -> Snowflake Cortex AISQL."""

from __future__ import annotations

import json

from quail_engine.sql.emit.common import (
    dispatch,
    lit,
    refuse,
    single,
    warn,
)
from quail_engine.sql.ir import AiOp, OpKind
from quail_engine.sql.shapes import shows_details

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


def model_params(op: AiOp) -> str:
    g = op.options.gen
    values = {k: v for k, v in (("temperature", g.temperature), ("top_p", g.top_p),
                                ("max_tokens", g.max_tokens)) if v is not None}
    return f", {object_text(values)}" if values else ""


def _generate(op: AiOp, args: list[str]) -> str:
    a = dict(op.task_args)
    if op.task == "translate":
        no_model("AI_TRANSLATE", op)
        return (f"AI_TRANSLATE({prompt_sql(op, args)}, {lit(a.get('source_language', ''), NAME)}, "
                f"{lit(a.get('target_language', 'en'), NAME)})")
    if op.task == "summarize":
        if a.get("max_words"):
            warn("SUMMARIZE", NAME, "Snowflake's SUMMARIZE has no word limit; max_words dropped")
        return f"SNOWFLAKE.CORTEX.SUMMARIZE({prompt_sql(op, args)})"
    if op.task is not None:
        raise refuse(f"ai_{op.task}", NAME, "Cortex has no such task function", op)
    model = op.options.model
    if model is None:
        model = DEFAULT_MODEL
        warn("AI_COMPLETE", NAME, f"AI_COMPLETE needs a model; using {DEFAULT_MODEL!r}")
    params = model_params(op)
    if "responseFormat" in a:
        warn("ai_query", NAME, "a Databricks responseFormat has no AI_COMPLETE spelling; dropped")
    if shows_details(op):  # named arguments: positional ones cannot skip to show_details
        named = [f"model => {lit(model, NAME)}", f"prompt => {prompt_sql(op, args)}"]
        if params:
            named.append(f"model_parameters => {params[2:]}")
        if "response_format" in a:
            named.append(f"response_format => {a['response_format']}")
        return f"AI_COMPLETE({', '.join(named)}, show_details => TRUE)"
    if "response_format" in a:
        params = f"{params or ', {}'}, {a['response_format']}"
    sql = f"AI_COMPLETE({lit(model, NAME)}, {prompt_sql(op, args)}{params})"
    if op.output_type in ("BIGINT", "DOUBLE"):
        warn("AI_COMPLETE", NAME, f"typed generation becomes a cast of free text to "
             f"{op.output_type}")
        return f"TRY_CAST({sql} AS {'INT' if op.output_type == 'BIGINT' else 'FLOAT'})"
    return sql


EMITTERS = {
    OpKind.AI_GENERATE: _generate,
}


def emit(op: AiOp, args: list[str]) -> str:
    return dispatch(EMITTERS, op, args, NAME)

