"""Reading literal arguments: strings, numbers, arrays, option objects, label lists.

Labels, fields and options must be known before any row is read, so anything that is not a
literal raises `LabelsNotLiteralError` quoting the argument.
"""

from __future__ import annotations

import json
from typing import Any

from sqlglot import exp

from quail_engine.sql.call import fragment
from quail_engine.sql.errors import ArgumentError, LabelsNotLiteralError
from quail_engine.sql.ir import GenParams, Label

_NOT_LITERAL = object()


def _value(node: exp.Expr) -> Any:
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg):
        inner = _value(node.this)
        return -inner if isinstance(inner, int | float) else _NOT_LITERAL
    if isinstance(node, exp.Paren):
        return _value(node.this)
    if isinstance(node, exp.Array | exp.Tuple):
        items = [_value(e) for e in node.expressions]
        return _NOT_LITERAL if _NOT_LITERAL in items else items
    if isinstance(node, exp.Struct):
        out: dict[str, Any] = {}
        for e in node.expressions:
            if not isinstance(e, exp.PropertyEQ | exp.Alias):
                return _NOT_LITERAL
            key = e.this.name if isinstance(e, exp.PropertyEQ) else e.alias
            out[key] = _value(e.expression if isinstance(e, exp.PropertyEQ) else e.this)
        return _NOT_LITERAL if _NOT_LITERAL in out.values() else out
    if isinstance(node, exp.VarMap):
        keys, values = _value(node.args["keys"]), _value(node.args["values"])
        if _NOT_LITERAL in (keys, values):
            return _NOT_LITERAL
        return dict(zip(keys, values))
    if isinstance(node, exp.ParseJSON) and isinstance(node.this, exp.Literal):
        return json.loads(node.this.this)
    if isinstance(node, exp.Cast):
        return _value(node.this)
    return _NOT_LITERAL


def literal(node: exp.Expr, what: str, fn: str, dialect: str) -> Any:
    """The Python value of a literal argument (str, int, float, bool, None, list, dict)."""
    value = _value(node)
    if value is _NOT_LITERAL:
        raise LabelsNotLiteralError(f"{fn}: {what} must be a literal, got {fragment(node, dialect)}",
                                    fragment(node, dialect), dialect)
    return value


def string(node: exp.Expr, what: str, fn: str, dialect: str) -> str:
    value = literal(node, what, fn, dialect)
    if not isinstance(value, str):
        raise ArgumentError(f"{fn}: {what} must be a string, got {fragment(node, dialect)}",
                            fragment(node, dialect), dialect)
    return value


def options(node: exp.Expr | None, what: str, fn: str, dialect: str) -> dict[str, Any]:
    """An option object (`{'k': v}`, `named_struct`, `map`, `JSON '{...}'`) as a dict."""
    if node is None:
        return {}
    value = literal(node, what, fn, dialect)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if not isinstance(value, dict):
        raise ArgumentError(f"{fn}: {what} must be an object, got {fragment(node, dialect)}",
                            fragment(node, dialect), dialect)
    return value


def labels(node: exp.Expr, fn: str, dialect: str, *, min_count: int = 1) -> tuple[Label, ...]:
    """Categories as written: ARRAY of strings, of {label, description} objects, of
    [label, description] pairs, an object {label: description}, or a JSON string of these."""
    value = literal(node, "the labels", fn, dialect)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    out: list[Label] = []
    if isinstance(value, dict):
        out = [Label(str(k), None if v is None else str(v)) for k, v in value.items()]
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                out.append(Label(item))
            elif isinstance(item, dict) and "label" in item:
                desc = item.get("description")
                out.append(Label(str(item["label"]), None if desc is None else str(desc)))
            elif isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
                out.append(Label(item[0], str(item[1])))
            else:
                out = []
                break
    if len(out) < min_count:
        raise ArgumentError(f"{fn}: expected a list of at least {min_count} labels, got "
                            f"{fragment(node, dialect)}", fragment(node, dialect), dialect)
    return tuple(out)


def gen_params(values: dict[str, Any]) -> GenParams:
    """Generation parameters from a vendor options object (names vary by vendor)."""
    lowered = {k.lower(): v for k, v in values.items()}
    config = lowered.get("generation_config") or lowered.get("generationconfig") or {}
    lowered.update({k.lower(): v for k, v in config.items()} if isinstance(config, dict) else {})
    max_tokens = (lowered.get("max_tokens") or lowered.get("max_output_tokens")
                  or lowered.get("maxoutputtokens"))
    stop = lowered.get("stop") or lowered.get("stop_sequences") or lowered.get("stopsequences")
    if isinstance(stop, str):
        stop = [stop]
    top_p = lowered.get("top_p", lowered.get("topp"))
    temperature = lowered.get("temperature")
    return GenParams(max_tokens=None if max_tokens is None else int(max_tokens),
                     temperature=None if temperature is None else float(temperature),
                     top_p=None if top_p is None else float(top_p),
                     stop=tuple(str(s) for s in stop or ()))
