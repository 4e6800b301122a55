"""IR -> BigQuery AI functions (prompts as tuples, `.result` re-added)."""

from __future__ import annotations

import json

from quail_engine.sql.emit.common import (
    dispatch,
    example_outputs,
    lit,
    parts,
    task_prefix,
    warn,
)
from quail_engine.sql.ir import AiOp, OpKind

NAME = "bigquery"
TYPED = {"BIGINT": "AI.GENERATE_INT", "DOUBLE": "AI.GENERATE_DOUBLE"}


def prompt_sql(op: AiOp, args: list[str], prefix: str = "") -> str:
    pieces = parts(op, args, NAME, prefix)
    return pieces[0] if len(pieces) == 1 else f"({', '.join(pieces)})"


def endpoint(op: AiOp) -> str:
    return f", endpoint => {lit(op.options.model, NAME)}" if op.options.model else ""


def managed(fn: str, op: AiOp) -> str:
    g = op.options.gen
    if any(v not in (None, ()) for v in (g.temperature, g.top_p, g.max_tokens, g.stop or None)):
        warn(fn, NAME, "managed AI functions take no generation parameters; they are dropped")
    extra = endpoint(op)
    if op.options.max_error_ratio is not None:
        extra += f", max_error_ratio => {op.options.max_error_ratio}"
    return extra


def examples_sql(op: AiOp) -> str:
    """`examples => [(input, output), ...]`: a filter's TRUE/FALSE, a single-label
    classification's label, a multi-label one's ARRAY of labels."""
    if not op.examples:
        return ""
    pairs = []
    for text, out in example_outputs(op):
        if isinstance(out, bool):
            value = "TRUE" if out else "FALSE"
        elif isinstance(out, list) and op.multi:
            value = "[" + ", ".join(lit(str(x), NAME) for x in out) + "]"
        else:
            value = lit(str(out[0] if isinstance(out, list) and out else out), NAME)
        pairs.append(f"({lit(text, NAME)}, {value})")
    return f", examples => [{', '.join(pairs)}]"


def _model_params(op: AiOp) -> str:
    g = op.options.gen
    config = {k: v for k, v in (("maxOutputTokens", g.max_tokens), ("temperature", g.temperature),
                                ("topP", g.top_p), ("stopSequences", list(g.stop) or None))
              if v is not None}
    if not config:
        return ""
    return f", model_params => JSON {lit(json.dumps({'generationConfig': config}), NAME)}"


def _generate(op: AiOp, args: list[str]) -> str:
    prefix = task_prefix(op)
    if op.task is not None:
        warn(f"ai_{op.task}", NAME, "spelled as AI.GENERATE with an instruction prefix")
    if {"response_format", "responseFormat"} & set(dict(op.task_args)):
        warn("ai_generate", NAME, "the response format is dropped (AI.GENERATE takes an "
             "output_schema of its own)")
    fn = TYPED.get(op.output_type, "AI.GENERATE")
    return f"{fn}({prompt_sql(op, args, prefix)}{endpoint(op)}{_model_params(op)}).result"


EMITTERS = {
    OpKind.AI_GENERATE: _generate,
}


def emit(op: AiOp, args: list[str]) -> str:
    return dispatch(EMITTERS, op, args, NAME)
