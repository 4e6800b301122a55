"""Price arithmetic, price lookup and the rendered table of the cost estimate (pure logic: the
counts are given, no data or model is read)."""

from __future__ import annotations

import pytest

from quail_engine.errors import QuailError
from quail_engine.migrate import prices
from quail_engine.migrate.cost import CallCost, ModelCost, estimate, render
from quail_engine.migrate.prices import Price
from quail_engine.migrate.rates import RATES

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


@pytest.mark.parametrize("text,item,unit,price_in,price_out", [
    ("AI_FILTER=1.2credits", "AI_FILTER", "credits", 1.2, 1.2),  # one number: in and out
    ("AI_COMPLETE:llama3.1-8b=0.19/0.19credits", "AI_COMPLETE:llama3.1-8b", "credits",
     0.19, 0.19),
    ("AI.IF=0.30/2.50USD", "AI.IF", "USD", 0.30, 2.50),
    ("ai_query:databricks-meta-llama-3-3-70b-instruct = 7.143 / 21.429 DBU",
     "ai_query:databricks-meta-llama-3-3-70b-instruct", "DBU", 7.143, 21.429),
    ("AI_CLASSIFY=.5/0", "AI_CLASSIFY", "", 0.5, 0.0),  # no unit: the warehouse's own
    ("AI.GENERATE:publishers/google/models/gemini-2.5-flash=0.15/1.25usd",
     "AI.GENERATE:publishers/google/models/gemini-2.5-flash", "USD", 0.15, 1.25),
])
def test_parse_a_user_price(text, item, unit, price_in, price_out):
    price = prices.parse_price(text)
    assert (price.item, price.unit, price.input_per_million, price.output_per_million) == (
        item, unit, pytest.approx(price_in), pytest.approx(price_out))
    assert price.user_given and price.source == f"--price {text}"


@pytest.mark.parametrize("text,reason", [
    ("AI_FILTER", "expected FUNCTION"),
    ("AI_FILTER=", "expected FUNCTION"),
    ("=1.2credits", "expected FUNCTION"),
    ("AI_FILTER=-1", "not a price"),
    ("AI_FILTER=abc", "not a price"),
    ("AI_FILTER=1/2/3", "not a price"),
    ("AI_FILTER=1.2euros", "unknown unit 'euros'"),
    ("AI FILTER=1", "not a FUNCTION"),
    ("AI_COMPLETE:=1", "not a FUNCTION"),
    ("AI_FILTER=1e999", "finite"),
])
def test_a_bad_user_price_is_a_one_line_error_quoting_it(text, reason):
    with pytest.raises(QuailError, match=reason) as caught:
        prices.parse_price(text)
    assert repr(text) in str(caught.value) and "\n" not in str(caught.value)


def test_the_same_item_priced_twice_is_an_error():
    assert len(prices.parse_prices(["AI_FILTER=1", "AI_COMPLETE:llama3.1-8b=1"])) == 2
    with pytest.raises(QuailError, match="AI_FILTER is given twice"):
        prices.parse_prices(["AI_FILTER=1", "ai_filter=2credits"])


@pytest.mark.parametrize("text,usd", [("3", 3.0), ("2.20", 2.2), ("$2", 2.0), ("2 USD", 2.0)])
def test_parse_a_credit_price(text, usd):
    assert prices.parse_credit_price(text) == pytest.approx(usd)


@pytest.mark.parametrize("text", ["-2", "two", "", "$", "inf", "2credits"])
def test_a_bad_credit_price_is_a_one_line_error_quoting_it(text):
    with pytest.raises(QuailError, match="--credit-price") as caught:
        prices.parse_credit_price(text)
    assert repr(text) in str(caught.value)


def test_a_user_price_wins_over_the_table(table):
    user = prices.parse_prices(["AI_COMPLETE=0.5credits", "AI_CLASSIFY=0.3",
                                "AI.GENERATE:gemini-2.5-flash=0.15/1.25USD"])
    found = prices.lookup("snowflake", "AI_COMPLETE", "llama3.1-8b", user)
    assert found.user_given and found.input_per_million == 0.5  # over the table's model row
    classify = prices.lookup("snowflake", "AI_CLASSIFY", None, user)
    assert classify.user_given and classify.unit == "credits"  # the warehouse's unit
    assert prices.lookup("databricks", "AI_CLASSIFY", None, user).unit == "DBU"
    assert prices.lookup("snowflake", "AI_FILTER", None, user) is TABLE[0]  # not given
    assert prices.lookup("bigquery", "AI.GENERATE", "gemini-2.5-flash", user).user_given
    assert not prices.lookup("bigquery", "AI.GENERATE", "gemini-2.5-pro", user).user_given


def test_user_priced_costs_are_labelled_given_and_credits_turn_into_dollars(table):
    given = prices.parse_price("AI_CLASSIFY=2credits")
    only_published = model_cost("published", counted("AI_FILTER", 2e6, TABLE[0]))
    user = model_cost("user", counted("AI_CLASSIFY", 1e6, given))
    assert not only_published.is_user_priced and user.is_user_priced
    assert user.warehouse_cost == pytest.approx(2.0) and user.warehouse_unit == "credits"
    in_dollars = ModelCost("model.shop.dollars", "models/dollars.sql", "snowflake",
                           (counted("AI_FILTER", 2e6, TABLE[0]),
                            counted("AI.IF", 1e6, prices.parse_price("AI.IF=0.3USD"))),
                           credit_price=2.5)
    assert in_dollars.warehouse_cost == pytest.approx(3.0 * 2.5 + 0.3)  # one sum, in dollars
    assert in_dollars.warehouse_unit == "USD" and in_dollars.is_user_priced

    lines = render([only_published, user, in_dollars])
    rows = {line.split()[0]: line for line in lines[2:5]}
    assert "3.00 credits " in rows["model.shop.published"]
    assert "(given)" not in rows["model.shop.published"]
    assert "2.00 credits (given)" in rows["model.shop.user"]
    assert "$7.80 (given)" in rows["model.shop.dollars"]
    legend = next(line for line in lines if line.startswith("warehouse:"))
    assert "--price AI_CLASSIFY=2credits" in legend and "--price AI.IF=0.3USD" in legend
    assert "--credit-price $2.50" in legend
    assert "(given)" not in next(line for line in render([only_published])
                                 if line.startswith("warehouse:"))


def test_a_negative_credit_price_is_refused():
    with pytest.raises(QuailError, match="price of a credit"):
        estimate([], [], database=None, credit_price=-1.0)
