"""Option and field values of an AI call, checked when the query is read: type and range, so
that every command (explain, transpile, query, dbt) accepts or refuses the same hints. Each
refusal is an ArgumentError naming the function and the option and quoting the value.

Numbers may be written as numbers or as strings holding one (vendor JSON options often quote
them); they are stored as int/float. Ranges:

    selectivity       0 < s <= 1          max_error_ratio   0 <= r <= 1
    temperature       0 <= t <= 2         top_p             0 <= p <= 1
    max_tokens        1 <= n <= 1,000,000 (an integer)
    on_error          null | fail | details     order   as_written
    model, anchor     strings              stop             a string or a list of strings
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from quail_engine.errors import shorten
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import ON_ERROR, GenParams, Label, Options
from quail_engine.sql.op_kinds import SQL_TYPES
from quail_engine.sql.task_prompts import TASK_NAMES

ORDERS = ("as_written",)
MAX_TOKENS = 1_000_000
VALUE_QUOTE = 80


@dataclass(frozen=True)
class Site:
    """Where a value was written: the function's name, its SQL (quoted in errors), the dialect."""

    fn: str
    sql: str
    dialect: str
    names: tuple[tuple[str, str], ...] = ()  # an IR option name -> as the user wrote it

    def option(self, name: str) -> str:
        """`option <name>` in the user's spelling of the IR option `name`: a message names
        what the user wrote (`option max_output_tokens`, not quail's `max_tokens`)."""
        return f"option {dict(self.names).get(name, name)}"


def show(value: Any) -> str:
    """A Python value read from SQL, spelled back as SQL-ish text, shortened for a message."""
    return shorten(_spelled(value), VALUE_QUOTE)


def _spelled(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_spelled(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_spelled(str(k))}: {_spelled(v)}" for k, v in value.items()) + "}"
    return str(value)


def refuse(site: Site, what: str, expected: str, value: Any) -> ArgumentError:
    return ArgumentError(f"{site.fn}: {what} must be {expected}, got {show(value)}", site.sql,
                         site.dialect)


def number(site: Site, what: str, value: Any, low: float, high: float, *,
           low_open: bool = False, integer: bool = False) -> float | int:
    """`value` as a number within [low, high] (or (low, high] with `low_open`)."""
    interval = f"{'(' if low_open else '['}{_plain(low)}, {_plain(high)}]"
    expected = f"{'an integer' if integer else 'a number'} in {interval}"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise refuse(site, what, expected, value)
    try:
        x = float(value)
    except (ValueError, OverflowError):  # not a number; an int past float's range
        raise refuse(site, what, expected, value) from None
    inside = (low < x if low_open else low <= x) and x <= high
    if not inside or math.isnan(x) or (integer and x != int(x)):
        raise refuse(site, what, expected, value)
    if integer:
        return int(x)
    return int(value) if isinstance(value, int) else x


def _plain(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


def text(site: Site, what: str, value: Any, choices: tuple[str, ...] = ()) -> str:
    """`value` as a non-empty string (lower-cased and one of `choices` when given)."""
    expected = f"one of {', '.join(choices)}" if choices else "a non-empty string"
    if not isinstance(value, str) or not value.strip():
        raise refuse(site, what, expected, value)
    if choices:
        if value.lower() not in choices:
            raise refuse(site, what, expected, value)
        return value.lower()
    return value


def boolean(site: Site, what: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise refuse(site, what, "TRUE or FALSE", value)


def _optional(check, site: Site, what: str, value: Any, *args, **kwargs):
    return None if value is None else check(site, what, value, *args, **kwargs)


def checked_gen(gen: GenParams, site: Site) -> GenParams:
    stop = gen.stop
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, list | tuple) or not all(isinstance(s, str) and s for s in stop):
        raise refuse(site, site.option("stop"), "a string or a list of non-empty strings",
                     gen.stop)
    return GenParams(
        max_tokens=_optional(number, site, site.option("max_tokens"), gen.max_tokens, 1,
                             MAX_TOKENS, integer=True),
        temperature=_optional(number, site, site.option("temperature"), gen.temperature, 0, 2),
        top_p=_optional(number, site, site.option("top_p"), gen.top_p, 0, 1),
        stop=tuple(stop))


def checked_options(options: Options, site: Site) -> Options:
    """`options` with every value of the right type and range, or an ArgumentError."""
    o = options
    return dataclasses.replace(
        o,
        model=_optional(text, site, site.option("model"), o.model),
        selectivity=_optional(number, site, site.option("selectivity"), o.selectivity, 0, 1,
                              low_open=True),
        anchor=_optional(text, site, site.option("anchor"), o.anchor),
        order=_optional(text, site, site.option("order"), o.order, ORDERS),
        gen=checked_gen(o.gen, site),
        on_error=text(site, site.option("on_error"), o.on_error, ON_ERROR),
        max_error_ratio=_optional(number, site, site.option("max_error_ratio"),
                                  o.max_error_ratio, 0, 1))


def checked_labels(labels: Any, site: Site, what: str = "the labels") -> tuple[Label, ...]:
    """Label names: non-empty strings, none twice; descriptions strings or NULL."""
    if not isinstance(labels, tuple | list):
        raise refuse(site, what, "a list of labels", labels)
    seen: set[str] = set()
    for lb in labels:
        if not isinstance(lb, Label) or not isinstance(lb.name, str) or not lb.name.strip():
            raise refuse(site, "a label name", "a non-empty string",
                         getattr(lb, "name", lb))
        if lb.description is not None and not isinstance(lb.description, str):
            raise refuse(site, f"the description of label {show(lb.name)}", "a string",
                         lb.description)
        if lb.name in seen:
            raise ArgumentError(f"{site.fn}: label {show(lb.name)} is listed twice", site.sql,
                                site.dialect)
        seen.add(lb.name)
    return tuple(labels)


def checked_fields(fields: dict[str, Any], site: Site) -> dict[str, Any]:
    """The AiOp fields a builder passes besides the prompt and options."""
    out = dict(fields)
    if out.get("labels") is not None:
        out["labels"] = checked_labels(out["labels"], site)
    if "multi" in out:
        out["multi"] = boolean(site, site.option("multi"), out["multi"])
    for name in ("instruction", "task"):
        if out.get(name) is not None:
            out[name] = text(site, site.option(name), out[name],
                             TASK_NAMES if name == "task" else ())
    if out.get("examples"):
        examples = out["examples"]
        if not all(isinstance(e, tuple) and len(e) == 2 and all(isinstance(x, str) for x in e)
                   for e in examples):
            raise refuse(site, "the examples", "a list of (input, output) pairs", examples)
    return out


def checked_output_type(value: Any, site: Site) -> str:
    name = text(site, site.option("output_type"), value, tuple(t.lower() for t in SQL_TYPES))
    return name.upper()


def known_keys(site: Site, what: str, values: dict, known: tuple[str, ...]) -> None:
    """Refuse a key of `values` the vendor does not document (a misspelling), listing them."""
    unknown = sorted(k for k in values if str(k).lower() not in known)
    if unknown:
        raise ArgumentError(f"{site.fn}: unknown key {show(str(unknown[0]))} in {what}; known: "
                            f"{', '.join(known)}", site.sql, site.dialect)


def label_count(site: Site, labels: tuple[Label, ...], high: int, form: str = "") -> None:
    """Refuse more labels than the vendor takes (`form` names the variant, e.g. 'v1')."""
    if len(labels) > high:
        raise ArgumentError(f"{site.fn}{f' {form}' if form else ''} takes at most {high} labels,"
                            f" got {len(labels)}", site.sql, site.dialect)


def language(site: Site, what: str, code: str, codes: tuple[str, ...]) -> str:
    """A documented language code (lower case), or an ArgumentError listing them."""
    if code.lower() not in codes:
        listed = ", ".join(c or "''" for c in codes)
        raise refuse(site, what, f"one of the documented codes {listed}", code)
    return code.lower()
