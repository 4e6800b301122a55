"""What a dialect builder returns, and the helpers builders share."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlglot import exp

from quail_engine.sql.call import Call
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import FREE_TEXT, AiOp, Binding, Options
from quail_engine.sql.op_kinds import OpKind, kinds, spec
from quail_engine.sql.prompt import Prompt
from quail_engine.sql.response_schema import SchemaError, json_schema
from quail_engine.sql.shapes import SHOW_DETAILS
from quail_engine.sql.validate import (
    Site,
    checked_fields,
    checked_options,
    checked_output_type,
)

AGGREGATE_OPS = kinds(is_aggregate=True)  # one answer per group

SENTIMENT_LABELS = {
    "snowflake": ("positive", "negative", "neutral", "mixed", "unknown"),
    "databricks": ("positive", "negative", "neutral", "mixed"),
}


@dataclass
class Built:
    """A lowered AI call: the IR node, the binding expressions (source AST) in slot order, and
    `shape`, the vendor packaging of the bare call's result (a key of `shapes.SHAPES`, a tree
    around `shapes.slot()` where the call's own names make it, or None when the bare call
    already returns the canonical type)."""

    op: AiOp
    exprs: tuple[exp.Expr, ...] = ()
    shape: str | exp.Expr | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def binding(index: int, node: exp.Expr) -> Binding:
    alias = column = None
    if isinstance(node, exp.Column):
        alias, column = (node.table or None), node.name
    modality = "image" if isinstance(node, exp.Anonymous) and node.name.upper() in (
        "TO_FILE", "FL_GET_FILE") else "text"
    # a copy: the statement's tree is rewritten after lowering, the binding keeps what it read
    return Binding(index=index, sql=node.sql(dialect="duckdb"), alias=alias, column=column,
                   modality=modality, node=node.copy())


def make(op: str, prompt: Prompt, call: Call, *, shape: str | None = None,
         options: Options | None = None, output_type: str | None = None,
         read_schema: Callable[[], dict | None] | None = None, **fields: Any) -> Built:
    """An AiOp for `call` with the prompt's template and bindings; option and field values are
    checked for type and range (validate.py) before the node is built. `read_schema` reads the
    answer's schema off the call's own nodes where a dialect has its response format as a tree
    (else it is read from the node's task arguments: `json_schema`)."""
    site = Site(call.name, call.sql(call.dialect), call.dialect, tuple(call.spelled.items()))
    if "task_args" in fields:
        fields["task_args"] = tuple(sorted(fields["task_args"]))
    fields = checked_fields(fields, site)
    if op == OpKind.AI_GENERATE and SHOW_DETAILS in fields.get("task_args", ()):
        output_type = "JSON"  # the whole show_details object (shapes.SHOW_DETAILS)
    node = AiOp(op=op, template=prompt.template,
                bindings=tuple(binding(i, e) for i, e in enumerate(prompt.exprs)),
                options=checked_options(options or Options(), site),
                output_type=(spec(op).default_type(fields.get("multi", False))
                             if output_type is None
                             else checked_output_type(output_type, site)),
                **fields)
    try:  # a response format is read now, not first when the engine decodes under it
        schema = (read_schema or partial(json_schema, node))()
        node = dataclasses.replace(node, schema=FREE_TEXT if schema is None else schema)
    except SchemaError as exc:
        raise ArgumentError(f"{call.name}: {exc}", site.sql, call.dialect) from None
    return Built(op=node, exprs=prompt.exprs, shape=shape)


def vendor_items(values: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """Options kept verbatim for round trips, as sorted (key, text) pairs."""
    return tuple(sorted((k, v if isinstance(v, str) else _json(v)) for k, v in values.items()
                        if v is not None))


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
