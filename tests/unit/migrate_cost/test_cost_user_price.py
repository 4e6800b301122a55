"""`quail migrate --price/--credit-price` on the Snowflake integration project: the warehouse
column is priced from the user's figures, on the tokens counted from the project's seed, and
labelled (given); a bad value is one line, exit 2, before dbt runs."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from quail_engine.cli import main

PROJECT = Path(__file__).resolve().parents[3] / "integration_tests" / "migrate_snowflake"


def _migrate(capsys, *args) -> tuple[int, list[str], str]:
    code = main(["migrate", "--quiet", str(PROJECT), *map(str, args)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.mark.dbt
@pytest.mark.model
def test_the_warehouse_column_is_priced_from_the_users_figures(tmp_path, capsys,
                                                               require_embedded):
    require_embedded("gemma3-270m")  # the tokenizer the tokens are counted with
    data = tmp_path / "dev.duckdb"  # the seed, where `dbt seed` on quail puts it
    with duckdb.connect(str(data)) as con:
        con.execute("CREATE TABLE shop_reviews AS SELECT * FROM read_csv(?)",
                    [str(PROJECT / "seeds" / "shop_reviews.csv")])
    code, lines, _ = _migrate(capsys, "--data", data, "--price", "AI_CLASSIFY=1.2credits",
                              "--price", "AI_COMPLETE:llama3.1-8b=0.19/0.19credits",
                              "--price", "AI_FILTR=1", "--credit-price", "3")
    assert code == 0  # every call moves (AI_SENTIMENT with aspects included)
    rows = {ln.split()[0]: ln.split() for ln in lines if ln.startswith("model.shop.")
            and len(ln.split()) > 8}
    topics = rows["model.shop.review_topics"]
    assert topics[1:3] == ["AI_CLASSIFY", "6"]  # six reviews, one prompt each
    dollars = int(topics[3].replace(",", "")) * 1.2 / 1e6 * 3  # tokens x credits x $/credit
    assert topics[5:7] == [f"${dollars:.4f}", "(given)"]
    replies = rows["model.shop.review_replies"]  # 2 prompts, input and output at 0.19
    assert replies[1] == "AI_COMPLETE" and replies[6] == "(given)"
    delivery = rows["model.shop.delivery_complaints"]  # the macro's AI_FILTER, topic as {1}
    assert delivery[1:3] == ["AI_FILTER", "6"] and int(delivery[3].replace(",", "")) > 0
    assert delivery[5] == "n/p"  # nothing given, none published
    legend = next(ln for ln in lines if ln.startswith("warehouse:"))
    assert "(given): from a figure you gave (--price AI_COMPLETE:llama3.1-8b=0.19/0.19credits" \
        "; --price AI_CLASSIFY=1.2credits; --credit-price $3.00 per credit or DBU)" in legend
    assert lines[-1].startswith("--price AI_FILTR=1: no AI call of the project is priced by it")


@pytest.mark.parametrize("args,quoted", [
    (["--price", "AI_FILTER=1.2euros"], "'AI_FILTER=1.2euros'"),
    (["--price", "AI_FILTER=1", "--credit-price", "-3"], "'-3'"),
])
def test_a_bad_price_is_one_line_and_exit_2_before_dbt_runs(capsys, args, quoted):
    code, lines, err = _migrate(capsys, *args)
    assert code == 2 and lines == []
    assert quoted in err and len(err.strip().splitlines()) == 1
