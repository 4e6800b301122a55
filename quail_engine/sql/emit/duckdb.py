"""IR -> quail's canonical DuckDB functions (every IR field spelled as a named argument)."""

from __future__ import annotations

import json

from quail_engine.sql.emit.common import drop_examples, lit, single
from quail_engine.sql.ir import AiOp, OpKind, Options
from quail_engine.sql.op_kinds import spec
from quail_engine.sql.shapes import shows_details

NAME = "duckdb"


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return lit(str(v), NAME)


def _prompt(op: AiOp, args: list[str]) -> str:
    return single(op, args, NAME) or f"prompt({', '.join([lit(op.template, NAME), *args])})"


def _labels(op: AiOp) -> str:
    if any(lb.description for lb in op.labels):
        return "{" + ", ".join(f"{lit(lb.name, NAME)}: {lit(lb.description or '', NAME)}"
                               for lb in op.labels) + "}"
    return "[" + ", ".join(lit(lb.name, NAME) for lb in op.labels) + "]"


def _named(op: AiOp) -> list[str]:
    o, d, out = op.options, Options(), []
    for key in ("model", "selectivity", "anchor", "order", "on_error", "max_error_ratio"):
        if getattr(o, key) != getattr(d, key):
            out.append(f"{key} := {_value(getattr(o, key))}")
    for key in ("max_tokens", "temperature", "top_p"):
        if getattr(o.gen, key) is not None:
            out.append(f"{key} := {_value(getattr(o.gen, key))}")
    if o.gen.stop:
        out.append(f"stop := {_value(list(o.gen.stop))}")
    if op.task:
        out.append(f"task := {_value(op.task)}")
    if op.instruction and op.op != OpKind.AI_AGGREGATE:
        out.append(f"instruction := {_value(op.instruction)}")
    if op.multi:
        out.append("multi := true")
    if op.labels is not None and op.op not in (OpKind.AI_CLASSIFY, OpKind.AI_EXTRACT):
        out.append(f"labels := {_labels(op)}")
    if op.output_type not in (spec(op.op).output_type, spec(op.op).default_type(op.multi)) \
            and not shows_details(op):  # show_details := true says the type
        out.append(f"output_type := {_value(op.output_type)}")
    for key, value in op.task_args:
        if key != "distinct":
            out.append(f"{key} := {_value(_decode(value))}")
    return out


def _decode(value: str):
    try:
        decoded = json.loads(value)
    except (TypeError, json.JSONDecodeError):
        return value
    return decoded if isinstance(decoded, bool | int | float) else value


def emit(op: AiOp, args: list[str]) -> str:
    drop_examples(str(op.op), NAME, op)  # quail's functions take no examples
    name = OpKind.AI_FILTER if op.op == OpKind.AI_JOIN else op.op
    if op.op == OpKind.AI_SIMILARITY:
        positional = args[:2]
    else:
        positional = [_prompt(op, args)]
    if op.op == OpKind.AI_CLASSIFY or (op.op == OpKind.AI_EXTRACT and op.labels is not None):
        positional.append(_labels(op))
    if op.op == OpKind.AI_AGGREGATE and op.instruction is not None:
        positional.append(lit(op.instruction, NAME))
    distinct = "DISTINCT " if ("distinct", "true") in op.task_args else ""
    return f"{name}({distinct}{', '.join(positional + _named(op))})"
