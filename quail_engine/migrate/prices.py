"""The warehouses' published prices for their AI functions, as read on a date from a source.

One row per priced item: a function (Snowflake's task functions), or a function with the model
it runs (`AI_COMPLETE:llama3.1-8b`, BigQuery's `AI.GENERATE:gemini-2.5-flash`). Prices are per
million tokens in the row's `unit` (Snowflake credits, US dollars, Databricks DBUs). A function
whose price was not found in a published source has no row: `lookup` returns None and the report
says "no published price found"; nothing here is estimated. docs/prices.md lists the same table.
"""

from __future__ import annotations

from dataclasses import dataclass

READ_ON = "2026-12-01"


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

    def cost(self, input_tokens: float, output_tokens: float | None) -> float:
        """The price of `input_tokens` read and `output_tokens` written (None: none)."""
        out = (output_tokens or 0.0) * (self.output_per_million or 0.0)
        return (input_tokens * self.input_per_million + out) / 1e6


# Empty on READ_ON: none of the three vendors' price pages (Snowflake's Service Consumption Table,
# Vertex AI's generative AI pricing, Databricks' pricing) was among the stored pages searched;
# docs/prices.md lists what their docs say about billing and the third-party figures not used.
PRICES: tuple[Price, ...] = ()


def lookup(warehouse: str, function: str, model: str | None = None) -> Price | None:
    """The price of `function` (as written) with `model` (a vendor model or endpoint name,
    None: the function's own) on `warehouse`, or None when no published price was found."""
    wanted = [f"{function}:{model}".upper()] if model else []
    wanted.append(function.upper())
    rows = {p.item.upper(): p for p in PRICES if p.warehouse == warehouse}
    for item in wanted:
        if item in rows:
            return rows[item]
    return None
