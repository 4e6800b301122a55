"""The warehouses' published prices for their AI functions, as read on a date from a source,
and the prices a user gives instead (`quail migrate --price`).

One row per priced item: a function (Snowflake's task functions), or a function with the model
it runs (`AI_COMPLETE:llama3.1-8b`, BigQuery's `AI.GENERATE:gemini-2.5-flash`). Prices are per
million tokens in the row's `unit` (Snowflake credits, US dollars, Databricks DBUs). A function
whose price was not found in a published source has no row: `lookup` returns None and the report
says "no published price found"; nothing here is estimated. docs/prices.md lists the same table.
A user-given price (`parse_price`) is a Price with `user_given` set: it wins over the table and
the report labels it as given, never as published.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from quail_engine.migrate.project import MigrateError

READ_ON = "2026-12-02"  # the last search of the vendors' pages (docs/prices.md)


@dataclass(frozen=True)
class Price:
    warehouse: str                    # snowflake | bigquery | databricks
    item: str                         # FUNCTION or FUNCTION:model, as the vendor spells it
    unit: str                         # "credits" | "USD" | "DBU"
    input_per_million: float
    output_per_million: float | None  # None: output tokens are not billed
    source: str                       # the page the price was read from
    read_on: str = READ_ON
    note: str = ""
    user_given: bool = False          # from --price, not a published page

    def cost(self, input_tokens: float, output_tokens: float | None) -> float:
        """The price of `input_tokens` read and `output_tokens` written (None: none)."""
        out = (output_tokens or 0.0) * (self.output_per_million or 0.0)
        return (input_tokens * self.input_per_million + out) / 1e6


# Empty on READ_ON (searched 2026-12-01 and again 2026-12-02): none of the three vendors' price
# pages (Snowflake's Service Consumption Table, Vertex AI's generative AI pricing, Databricks'
# pricing) was among the stored pages searched; docs/prices.md lists what their docs say about
# billing, the searches, and the third-party figures not used. Users give theirs with --price.
PRICES: tuple[Price, ...] = ()


# The unit each warehouse bills its AI functions in: a user-given price without a unit is in it.
WAREHOUSE_UNITS = {"snowflake": "credits", "bigquery": "USD", "databricks": "DBU"}
# Units a dollar price per unit (--credit-price) turns into US dollars.
CREDIT_UNITS = ("credits", "DBU")
_UNITS = {"credits": "credits", "credit": "credits", "usd": "USD", "dbu": "DBU", "dbus": "DBU"}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_PRICE = re.compile(rf"(?P<input>{_NUMBER})(?:/(?P<output>{_NUMBER}))?(?P<unit>[A-Za-z]*)")
_FUNCTION = re.compile(r"[A-Za-z_][\w.]*")
_MODEL = re.compile(r"[^\s=]+")  # a model or endpoint name, a path or URL too
PRICE_FORM = "FUNCTION[:MODEL]=IN[/OUT][credits|USD|DBU], e.g. AI_FILTER=1.2credits"


def lookup(warehouse: str, function: str, model: str | None = None,
           user: Sequence[Price] = ()) -> Price | None:
    """The price of `function` (as written) with `model` (a vendor model or endpoint name,
    None: the function's own) on `warehouse`, or None when no price was found. A price in
    `user` (parse_price) wins over the published table; within each, FUNCTION:model wins over
    FUNCTION. A user price without a unit gets the warehouse's (WAREHOUSE_UNITS)."""
    wanted = [f"{function}:{model}".upper()] if model else []
    wanted.append(function.upper())
    for rows in ({p.item.upper(): p for p in user},
                 {p.item.upper(): p for p in PRICES if p.warehouse == warehouse}):
        for item in wanted:
            if item in rows:
                found = rows[item]
                if not found.unit:
                    found = dataclasses.replace(found, warehouse=warehouse,
                                                unit=WAREHOUSE_UNITS.get(warehouse, "credits"))
                return found
    return None


def parse_price(text: str) -> Price:
    """A user-given price, `FUNCTION[:MODEL]=IN[/OUT][UNIT]` (quail migrate --price): IN and
    OUT per million input and output tokens (one number: the same for both), UNIT one of
    credits, USD, DBU (none: the warehouse's own). A bad value is a one-line MigrateError
    quoting it."""
    item, sep, value = text.partition("=")
    item, value = item.strip(), "".join(value.split())
    if not sep or not item or not value:
        raise MigrateError(f"--price {text!r}: expected {PRICE_FORM}")
    function, colon, model = item.partition(":")
    if not _FUNCTION.fullmatch(function) or (colon and not _MODEL.fullmatch(model)):
        raise MigrateError(f"--price {text!r}: {item!r} is not a FUNCTION or FUNCTION:MODEL "
                           "name (e.g. AI_FILTER, AI.IF, 'AI_COMPLETE:llama3.1-8b')")
    found = _PRICE.fullmatch(value)
    if found is None:
        raise MigrateError(f"--price {text!r}: {value!r} is not a price per million tokens "
                           "(IN or IN/OUT, numbers of at least 0, then an optional unit: "
                           "credits, USD or DBU)")
    unit = found["unit"]
    if unit and unit.lower() not in _UNITS:
        raise MigrateError(f"--price {text!r}: unknown unit {unit!r} (credits, USD or DBU)")
    price_in = float(found["input"])
    price_out = float(found["output"]) if found["output"] is not None else price_in
    if not (math.isfinite(price_in) and math.isfinite(price_out)):
        raise MigrateError(f"--price {text!r}: the price must be a finite number")
    return Price("", item, _UNITS[unit.lower()] if unit else "", price_in, price_out,
                 f"--price {text.strip()}", read_on="", user_given=True)


def parse_prices(texts: Sequence[str]) -> tuple[Price, ...]:
    """Every --price value parsed; an item given twice is an error."""
    out: dict[str, Price] = {}
    for text in texts:
        price = parse_price(text)
        first = out.get(price.item.upper())
        if first is not None:
            raise MigrateError(f"--price {first.item} is given twice ({first.source!r} and "
                               f"{price.source!r})")
        out[price.item.upper()] = price
    return tuple(out.values())


def parse_credit_price(text: str) -> float:
    """The dollar price of one credit or DBU (quail migrate --credit-price): `2`, `2.00`, `$2`
    or `2USD`; a bad value is a one-line MigrateError quoting it."""
    value = "".join(text.split())
    value = value[1:] if value.startswith("$") else value
    value = value[:-3] if value.upper().endswith("USD") else value
    if not re.fullmatch(_NUMBER, value) or not math.isfinite(float(value)):
        raise MigrateError(f"--credit-price {text!r}: expected the US dollar price of one "
                           "credit or DBU, a number of at least 0 (e.g. 3 or 2.20)")
    return float(value)
