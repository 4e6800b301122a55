"""Price arithmetic, price lookup and the rendered table of the cost estimate (pure logic: the
counts are given, no data or model is read)."""

from __future__ import annotations

import pytest

from quail_engine.errors import QuailError
from quail_engine.migrate import prices
from quail_engine.migrate.cost import RATES, CallCost, ModelCost, estimate, render
from quail_engine.migrate.prices import Price

SOURCE = "https://example.invalid/prices"
TABLE = (Price("snowflake", "AI_FILTER", "credits", 1.5, 1.5, SOURCE),
         Price("snowflake", "AI_COMPLETE:llama3.1-8b", "credits", 0.2, 0.4, SOURCE),
         Price("snowflake", "AI_COMPLETE", "credits", 9.0, 9.0, SOURCE),
         Price("bigquery", "AI.GENERATE", "USD", 0.3, 2.5, SOURCE))


@pytest.fixture()
def table(monkeypatch):
    monkeypatch.setattr(prices, "PRICES", TABLE)


@pytest.mark.parametrize("price,tokens,expected", [
    (TABLE[0], (2_000_000, None), 3.0),         # input only
    (TABLE[3], (2_000_000, 1_000_000), 3.1),   # 2 x 0.3 + 1 x 2.5
    (Price("x", "F", "DBU", 1.0, None, SOURCE), (1e6, 5e6), 1.0),  # output not billed
])
def test_price_of_tokens(price, tokens, expected):
    assert price.cost(*tokens) == pytest.approx(expected)


@pytest.mark.parametrize("warehouse,function,model,item", [
    ("snowflake", "ai_complete", "LLAMA3.1-8B", "AI_COMPLETE:llama3.1-8b"),  # model row first
    ("snowflake", "AI_COMPLETE", "mistral-7b", "AI_COMPLETE"),             # else the function's
    ("snowflake", "AI_FILTER", None, "AI_FILTER"),
    ("bigquery", "AI_FILTER", None, None),                                 # another warehouse
    ("snowflake", "AI_CLASSIFY", None, None),                              # no published price
])
def test_lookup(table, warehouse, function, model, item):
    found = prices.lookup(warehouse, function, model)
    assert (found.item if found else None) == item


def model_cost(name: str, *calls: CallCost, gpu_price: float | None = None) -> ModelCost:
    return ModelCost(f"model.shop.{name}", f"models/{name}.sql", "snowflake", calls, gpu_price)


def counted(function: str, tokens: float, price: Price | None, **kw) -> CallCost:
    return CallCost(function, "ai_filter", prompts=100, input_tokens=tokens, price=price,
                    gpu_seconds=tokens / 1000, cpu_seconds=tokens / 10, **kw)


def test_model_totals_and_gpu_cost():
    cost = model_cost("m", counted("AI_FILTER", 2e6, TABLE[0]),
                      counted("AI_COMPLETE", 1e6, TABLE[1], output_tokens=5e5), gpu_price=3.6)
    assert cost.input_tokens == 3e6 and cost.output_tokens == 5e5
    assert cost.warehouse_cost == pytest.approx(3.0 + 0.2 + 0.2)
    assert cost.gpu_seconds == 3000 and cost.gpu_cost == pytest.approx(3.0)  # 3000 s at $3.6/h
    unpriced = model_cost("n", counted("AI_FILTER", 1e6, TABLE[0]),
                          counted("AI_CLASSIFY", 1e6, None))
    assert unpriced.warehouse_cost is None and unpriced.gpu_cost is None


def test_render_names_every_model_and_marks_what_is_not_known():
    costs = [model_cost("priced", counted("AI_FILTER", 2e6, TABLE[0]), gpu_price=3.6),
             model_cost("unpriced", counted("AI_CLASSIFY", 5e3, None, is_extrapolated=True,
                                            sampled_rows=1000)),
             model_cost("undata", CallCost("AI_FILTER", "ai_filter", price=TABLE[0]))]
    lines = render(costs)
    rows = {line.split()[0]: line for line in lines[2:5]}
    assert set(rows) == {"model.shop.priced", "model.shop.unpriced", "model.shop.undata"}
    assert "2.00 M" in rows["model.shop.priced"] and "3.00 credits" in rows["model.shop.priced"]
    assert "$2.00" in rows["model.shop.priced"]  # 2,000 s of GPU at $3.6/h
    assert "~5,000" in rows["model.shop.unpriced"] and " n/p " in rows["model.shop.unpriced"]
    assert rows["model.shop.undata"].split()[2:4] == ["unknown", "unknown"]
    assert any("1000" in line and line.startswith("~") for line in lines)
    assert any(r.source in line for r in RATES for line in lines)


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(QuailError, match="at least one row"):
        estimate([], [], database=None, sample_rows=0)
    with pytest.raises(QuailError, match="does not exist"):
        estimate([], [], database="/nonexistent/dev.duckdb")
