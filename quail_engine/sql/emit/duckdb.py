"""IR -> quail's canonical DuckDB functions: every IR field the kind's positional arguments do not
carry spelled as a named argument (`spelled`); each kind's emitter, which picks its positional
arguments, is in quail_engine/sql/functions/<kind>.py."""

from __future__ import annotations

import dataclasses
import json

from quail_engine.sql.emit import formats
from quail_engine.sql.emit.common import dispatch, drop_examples, lit, single
from quail_engine.sql.ir import AiOp, Options
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


def prompt_sql(op: AiOp, args: list[str]) -> str:
    return single(op, args, NAME) or f"prompt({', '.join([lit(op.template, NAME), *args])})"


def labels_sql(op: AiOp) -> str:
    if any(lb.description for lb in op.labels):
        return "{" + ", ".join(f"{lit(lb.name, NAME)}: {lit(lb.description or '', NAME)}"
                               for lb in op.labels) + "}"
    return "[" + ", ".join(lit(lb.name, NAME) for lb in op.labels) + "]"


def _named(op: AiOp, positional_fields: tuple[str, ...]) -> list[str]:
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
    if op.instruction and "instruction" not in positional_fields:
        out.append(f"instruction := {_value(op.instruction)}")
    if op.multi:
        out.append("multi := true")
    if op.labels is not None and "labels" not in positional_fields:
        out.append(f"labels := {labels_sql(op)}")
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


def spelled(op: AiOp, positional: list[str], name: str | None = None,
            positional_fields: tuple[str, ...] = ()) -> str:
    """`name(positional..., key := value...)`: every IR field the `positional` arguments do
    not carry (`positional_fields`: which of labels and instruction they do) spelled as a
    named argument; `name` defaults to the kind's own."""
    distinct = "DISTINCT " if ("distinct", "true") in op.task_args else ""
    named = _named(op, positional_fields)
    return f"{name or op.op}({distinct}{', '.join(positional + named)})"


def prompt_call(op: AiOp, args: list[str]) -> str:
    """A kind whose one positional argument is its prompt: `ai_<kind>(prompt, ...)`."""
    return spelled(op, [prompt_sql(op, args)])


EMITTERS: dict = {}  # OpKind -> emitter(op, args), filled by quail_engine.sql.functions


def own_format(op: AiOp) -> AiOp:
    """`op` with COMPLETE's `response_format` option as ai_generate's `response_format :=`
    argument, AI_COMPLETE's spelling here: the front end keeps the option as a vendor option,
    which no DuckDB function takes, so the call read back would answer free text. Written
    before show_details, where AI_COMPLETE's argument stands."""
    found = formats.source_format(op)
    if found is None or found in op.task_args:
        return op
    plain = formats.without_format(op)
    return dataclasses.replace(plain, task_args=(found, *plain.task_args))


def emit(op: AiOp, args: list[str]) -> str:
    drop_examples(str(op.op), NAME, op)  # quail's functions take no examples
    return dispatch(EMITTERS, own_format(op), args, NAME)
