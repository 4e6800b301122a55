"""The cost estimate as plain-text table lines (cost.render): one row per model, its notes,
then what the marks mean and where the prices and rates come from."""

from __future__ import annotations

from collections.abc import Sequence

from quail_engine.migrate import prices
from quail_engine.migrate.rates import RATES
from quail_engine.sql.op_kinds import SPECS

HEADER = ("model", "AI calls", "prompts", "input tokens", "output tokens", "warehouse",
          "GPU time", "GPU cost", "CPU time")
UNKNOWN = "unknown"
NO_PRICE = "n/p"
GIVEN = "(given)"


def table_lines(costs: Sequence) -> list[str]:
    rows = [HEADER] + [_row(c) for c in costs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for c in costs:
        notes = [c.note] if c.note else []
        notes += [f"{call.function}: {call.note}" for call in c.calls if call.note]
        lines += [f"{c.node}: {n}" for n in dict.fromkeys(notes)]
    samples = sorted({call.sampled_rows for c in costs for call in c.calls
                      if call.is_extrapolated})
    lines += [
        "",
        "~ extrapolated from a sample of the table's rows to its row count"
        + (f" (sampled rows per call: {', '.join(map(str, samples))})" if samples else "")
        + "; a join's prompts are its candidate pairs (rows x partners)"
        + "".join(f"; {k} runs {s.num_requests} prompts' work per row ({s.num_asks} asked, "
                  f"{s.num_references} content-free), each timed"
                  for k, s in SPECS.items() if s.num_requests > 1) + ".",
        "Tokens are counted with Quail's default model's tokenizer on Quail's prompts; the "
        "warehouse's tokenizer and its own prompt differ, by an amount not measured.",
        "<= output tokens: an upper bound (every prompt answered to its max tokens); only "
        "generative calls count output.",
        f"warehouse: published prices read on {prices.READ_ON} (docs/prices.md); "
        f"{NO_PRICE}: no published price found."
        + (f" {GIVEN}: from a figure you gave ({_given(costs)}), not a published price."
           if any(c.is_user_priced for c in costs) else ""),
        "+ time of the prompts' prefill only: no decode rate has been measured.",
    ]
    lines += [f"{r.device.upper()} {r.work}: {r.what} ({r.source})" for r in RATES]
    return lines


def _row(c) -> tuple[str, ...]:
    approx = "~" if c.is_extrapolated else ""
    prompts = [call.prompts for call in c.calls]
    functions = ", ".join(dict.fromkeys(call.function for call in c.calls))
    decode = "+" if any(call.is_decode_excluded for call in c.calls) else ""
    output = c.output_tokens
    return (c.node, functions,
            UNKNOWN if None in prompts or not prompts else approx + _count(sum(prompts)),
            UNKNOWN if c.input_tokens is None else approx + _count(c.input_tokens),
            UNKNOWN if output is None else ("-" if not output else "<=" + _count(output)),
            _warehouse(c),
            UNKNOWN if c.gpu_seconds is None else _seconds(c.gpu_seconds) + decode,
            "-" if c.gpu_price_per_hour is None else (
                UNKNOWN if c.gpu_cost is None else _money(c.gpu_cost, "USD")),
            UNKNOWN if c.cpu_seconds is None else _seconds(c.cpu_seconds) + decode)


def _warehouse(c) -> str:
    if any(call.price is None for call in c.calls):
        return NO_PRICE
    if c.warehouse_cost is None:
        return UNKNOWN
    unit = c.warehouse_unit
    if unit is None:  # calls priced in different units: no one sum
        return "mixed units"
    return (("~" if c.is_extrapolated else "") + _money(c.warehouse_cost, unit)
            + (" " + GIVEN if c.is_user_priced else ""))


def _given(costs) -> str:
    """The user's figures behind the (given) costs: each --price used, the credit price."""
    used = dict.fromkeys(call.price.source for c in costs for call in c.calls
                         if call.price is not None and call.price.user_given)
    credit = {c.credit_price for c in costs if c.is_user_priced and c.credit_price is not None
              and any(call.price is not None and call.price.unit in prices.CREDIT_UNITS
                      for call in c.calls)}
    return "; ".join([*used, *(f"--credit-price {_money(p, 'USD')} per credit or DBU"
                               for p in sorted(credit))])


def _count(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:,.2f} M"
    return f"{n:,.0f}"


def _seconds(s: float) -> str:
    if 0 < s < 0.01:
        return "<0.01 s"
    if s < 1:
        return f"{s:.2f} s"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:,.1f} h"


def _money(amount: float, unit: str) -> str:
    digits = 2 if amount >= 1 or amount == 0 else 4
    sign = "<" if 0 < amount < 0.0001 else ""
    amount = max(amount, 0.0001) if sign else amount
    if unit == "USD":
        return f"{sign}${amount:,.{digits}f}"
    return f"{sign}{amount:,.{digits}f} {unit}"
