"""Reading literal arguments: strings, numbers, arrays, option objects, label lists.

Labels, fields and options must be known before any row is read, so anything that is not a
literal raises `LabelsNotLiteralError` quoting the argument.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sqlglot import exp

from quail_engine.errors import shorten
from quail_engine.sql.call import Call, fragment
from quail_engine.sql.errors import ArgumentError, LabelsNotLiteralError
from quail_engine.sql.ir import GenParams, Label
from quail_engine.sql.nesting import check_json_nesting
from quail_engine.sql.validate import Site, boolean, number

_NOT_LITERAL = object()
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _MalformedJson(Exception):
    def __init__(self, text: str, error: ValueError):
        super().__init__(text)
        self.text, self.error = text, error


def parse_json(text: str, what: str, fn: str, node: exp.Expr, dialect: str) -> Any:
    """`text` as JSON, or an ArgumentError naming the function, the argument and the position."""
    check_json_nesting(text, fragment(node, dialect), dialect)
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or a number past Python's 4,300 digits
        raise _json_error(what, fn, node, dialect, text, exc) from None


def _json_error(what, fn, node, dialect, text, exc: ValueError) -> ArgumentError:
    if isinstance(exc, json.JSONDecodeError):
        why = f"{exc.msg} at character {exc.pos}"
    else:
        why = shorten(exc, 60)
    return ArgumentError(f"{fn}: malformed JSON in {what} ({why}): {shorten(text, 80)}",
                         fragment(node, dialect), dialect)


def _value(node: exp.Expr) -> Any:
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        if any(c in text for c in ".eE"):
            return float(text)
        try:
            return int(text)
        except ValueError:  # past Python's 4,300-digit int conversion limit
            return float(text)
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
        check_json_nesting(node.this.this, node.sql(), None)
        try:
            return json.loads(node.this.this)
        except ValueError as exc:
            raise _MalformedJson(node.this.this, exc) from None
    if isinstance(node, exp.Cast):
        return _value(node.this)
    return _NOT_LITERAL


def literal(node: exp.Expr, what: str, fn: str, dialect: str) -> Any:
    """The Python value of a literal argument (str, int, float, bool, None, list, dict)."""
    try:
        value = _value(node)
    except _MalformedJson as bad:
        raise _json_error(what, fn, node, dialect, bad.text, bad.error) from None
    if value is _NOT_LITERAL:
        raise LabelsNotLiteralError(f"{fn}: {what} must be a literal, got "
                                    f"{shorten(fragment(node, dialect), 80)}",
                                    fragment(node, dialect), dialect)
    return value


def string(node: exp.Expr, what: str, fn: str, dialect: str) -> str:
    value = literal(node, what, fn, dialect)
    if not isinstance(value, str):
        raise ArgumentError(f"{fn}: {what} must be a string, got "
                            f"{shorten(fragment(node, dialect), 80)}",
                            fragment(node, dialect), dialect)
    return value


def options(node: exp.Expr | None, what: str, fn: str, dialect: str) -> dict[str, Any]:
    """An option object (`{'k': v}`, `named_struct`, `map`, `JSON '{...}'`) as a dict."""
    if node is None:
        return {}
    value = literal(node, what, fn, dialect)
    if isinstance(value, str):
        value = parse_json(value, what, fn, node, dialect)
    if not isinstance(value, dict):
        raise ArgumentError(f"{fn}: {what} must be an object, got "
                            f"{shorten(fragment(node, dialect), 80)}", fragment(node, dialect),
                            dialect)
    return value


def flag(node: exp.Expr | None, what: str, call: Call) -> bool | None:
    """A TRUE/FALSE argument (None when absent)."""
    if node is None:
        return None
    value = literal(node, what, call.name, call.dialect)
    return boolean(Site(call.name, call.sql(call.dialect), call.dialect), what, value)


def whole(node: exp.Expr, what: str, call: Call, low: int = 0) -> int:
    """A non-negative (or >= `low`) integer argument."""
    value = literal(node, what, call.name, call.dialect)
    return int(number(Site(call.name, call.sql(call.dialect), call.dialect), what, value, low,
                      1e9, integer=True))


def schema_fields(schema: str, call: Call) -> list[tuple[str, str]]:
    """An output schema `'name STRING, n INT64'` as [(name, STRING), (n, INT64)]; every field
    needs an identifier and a type."""
    fields = [tuple(f.split(None, 1)) for f in _top_level(schema)]
    for f in fields:
        if len(f) != 2 or not IDENTIFIER.match(f[0]):
            raise ArgumentError(f"{call.name}: output_schema must list 'name TYPE' fields, got "
                                f"{shorten(repr(schema), 80)}", call.sql(call.dialect),
                                call.dialect)
    out = [(f[0], f[1].strip()) for f in fields]
    for name, kind in out:
        bad = _unknown_type(kind)
        if bad is not None:
            raise ArgumentError(f"{call.name}: output_schema field {name!r} has the type "
                                f"{shorten(bad, 40)!r}; the documented types are "
                                f"{', '.join(SCHEMA_TYPES)}", call.sql(call.dialect),
                                call.dialect)
    return out


# BigQuery's output_schema types (AI.GENERATE, AI.GENERATE_TABLE; NUMERIC read as a number)
SCHEMA_TYPES = ("STRING", "INT64", "FLOAT64", "BOOL", "NUMERIC", "ARRAY<T>", "STRUCT<f T, ...>")


def _unknown_type(kind: str) -> str | None:
    """The first type in `kind` (`ARRAY<STRUCT<a INT64>>`, ...) that is not documented."""
    kind = kind.strip()
    base, _, rest = kind.partition("<")
    base = base.strip().upper()
    if not rest:
        return None if base in SCHEMA_TYPES else kind
    if base not in ("ARRAY", "STRUCT") or not rest.endswith(">"):
        return kind
    inner = rest[:-1]
    if base == "ARRAY":
        return _unknown_type(inner)
    for field in _top_level(inner):
        parts = field.split(None, 1)
        if len(parts) != 2 or not IDENTIFIER.match(parts[0]):
            return field
        bad = _unknown_type(parts[1])
        if bad is not None:
            return bad
    return None


def _top_level(text: str) -> list[str]:
    """`text` split at the commas outside any `<...>`."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "<") - (c == ">")
        if c == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def labels(node: exp.Expr, fn: str, dialect: str, *, min_count: int = 1) -> tuple[Label, ...]:
    """Categories as written: ARRAY of strings, of {label, description} objects, of
    [label, description] pairs, an object {label: description}, or a JSON string of these."""
    value = literal(node, "the labels", fn, dialect)
    if isinstance(value, str):
        value = parse_json(value, "the labels", fn, node, dialect)
    out: list[Label] = []
    if isinstance(value, dict):
        out = [Label(str(k), _description(v)) for k, v in value.items()]
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                out.append(Label(item))
            elif isinstance(item, dict) and isinstance(item.get("label"), str):
                out.append(Label(item["label"], _description(item.get("description"))))
            elif isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
                out.append(Label(item[0], _description(item[1])))
            else:
                out = []
                break
    if len(out) < min_count:
        raise ArgumentError(f"{fn}: expected a list of at least {min_count} labels (strings), "
                            f"got {shorten(fragment(node, dialect), 80)}",
                            fragment(node, dialect), dialect)
    return tuple(out)


def _description(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


# each generation parameter's vendor spellings (lower case), in the order they are looked for
GEN_KEYS = {"max_tokens": ("max_tokens", "max_output_tokens", "maxoutputtokens"),
            "temperature": ("temperature",), "top_p": ("top_p", "topp"),
            "stop": ("stop", "stop_sequences", "stopsequences")}


def _gen_found(values: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Each generation parameter found in a vendor options object (a BigQuery
    generation_config's keys included): its IR name -> (the key as written, the value)."""
    written = {str(k).lower(): (str(k), v) for k, v in values.items()}
    config = written.get("generation_config", written.get("generationconfig", (None, None)))[1]
    if isinstance(config, dict):
        written.update({str(k).lower(): (str(k), v) for k, v in config.items()})
    found = {}
    for name, keys in GEN_KEYS.items():
        hit = next((written[k] for k in keys if written.get(k, (None, None))[1] is not None),
                   None)
        if hit is not None:
            found[name] = hit
    return found


def gen_params(values: dict[str, Any]) -> GenParams:
    """Generation parameters from a vendor options object (names vary by vendor), as written:
    `build.make` checks their types and ranges."""
    found = {name: value for name, (_, value) in _gen_found(values).items()}
    return GenParams(max_tokens=found.get("max_tokens"), temperature=found.get("temperature"),
                     top_p=found.get("top_p"), stop=found.get("stop", ()))


def gen_spelling(values: dict[str, Any]) -> dict[str, str]:
    """The keys of `values` the generation parameters were read from, by IR name (for
    `Call.spelled`: `max_output_tokens` where the IR says max_tokens)."""
    return {name: key for name, (key, _) in _gen_found(values).items()}
