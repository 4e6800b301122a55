"""IR -> BigQuery AI functions: the spellings every emitter shares (prompts as tuples, endpoint,
managed options, examples); each kind's emitter is in quail_engine/sql/functions/<kind>.py."""

from __future__ import annotations

from quail_engine.sql.emit.common import (
    dispatch,
    example_outputs,
    lit,
    parts,
    warn,
)
from quail_engine.sql.ir import AiOp

NAME = "bigquery"
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


EMITTERS: dict = {}  # OpKind -> emitter(op, args), filled by quail_engine.sql.functions


def emit(op: AiOp, args: list[str]) -> str:
    return dispatch(EMITTERS, op, args, NAME)
