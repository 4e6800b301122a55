"""IR -> Databricks AI Functions (filters as the `ai_classify(..., ARRAY('yes','no')) = 'yes'`
idiom, prompts as `concat(...)`)."""

from __future__ import annotations

from quail_engine.sql.emit.common import (
    concat,
    dispatch,
    drop_examples,
    lit,
    refuse,
    warn,
)
from quail_engine.sql.ir import AiOp, OpKind

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


def _generate(op: AiOp, args: list[str]) -> str:
    a = dict(op.task_args)
    if op.task == "summarize":
        words = f", {a['max_words']}" if a.get("max_words") else ""
        return f"ai_summarize({prompt_sql(op, args)}{words})"
    if op.task == "translate":
        if a.get("source_language"):
            warn("ai_translate", NAME, "ai_translate detects the source language; "
                 f"{a['source_language']!r} is dropped")
        return f"ai_translate({prompt_sql(op, args)}, {lit(a.get('target_language', 'en'), NAME)})"
    if op.task == "fix_grammar":
        return f"ai_fix_grammar({prompt_sql(op, args)})"
    if op.task == "mask":
        return f"ai_mask({prompt_sql(op, args)}, ARRAY({', '.join(lit(lb.name, NAME) for lb in op.labels)}))"
    if op.task is not None:
        raise refuse(f"ai_{op.task}", NAME, "Databricks has no such task function", op)
    if "response_format" in a:
        warn("AI_COMPLETE", NAME, "a Snowflake response_format has no ai_query spelling; dropped")
    fmt = f", responseFormat => {lit(a['responseFormat'], NAME)}" if "responseFormat" in a else ""
    if op.options.model:
        fail_on_error("ai_query", op)
        sql = f"ai_query({lit(op.options.model, NAME)}, {prompt_sql(op, args)}{model_params(op)}{fmt})"
    else:
        if model_params(op):
            warn("ai_gen", NAME, "ai_gen takes no generation parameters; they are dropped")
        sql = f"ai_gen({prompt_sql(op, args)})"
    if op.output_type in ("BIGINT", "DOUBLE"):
        warn("ai_generate", NAME, f"typed generation becomes a cast of free text to {op.output_type}")
        return f"TRY_CAST({sql} AS {op.output_type})"
    return sql


def refused(fn: str, why: str):
    def emit(op: AiOp, args: list[str]) -> str:
        raise refuse(fn, NAME, why, op)
    return emit


EMITTERS = {
    OpKind.AI_GENERATE: _generate,
}


def emit(op: AiOp, args: list[str]) -> str:
    drop_examples(str(op.op), NAME, op)  # no Databricks AI function takes examples
    return dispatch(EMITTERS, op, args, NAME)
