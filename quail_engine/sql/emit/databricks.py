"""IR -> Databricks AI Functions: the spellings every emitter shares (prompts as `concat(...)`,
modelParameters, refusals); each kind's emitter is in quail_engine/sql/functions/<kind>.py."""

from __future__ import annotations

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


def emit(op: AiOp, args: list[str]) -> str:
    drop_examples(str(op.op), NAME, op)  # no Databricks AI function takes examples
    return dispatch(EMITTERS, op, args, NAME)
