"""`quail migrate` counts and times a call by its kind's prompts per row (OpSpec.num_requests):
AI_SIMILARITY reads each text after the other and their second texts after a content-free
document, three prompts per row, so its prompts and its time are three times a one-prompt
call's over the same rows and tokens, while the input tokens (what the warehouse reads) are
each row's once. Tokens are counted by a word-splitting stand-in for
the tokenizer: no model is needed."""

from __future__ import annotations

import duckdb
import pytest

from quail_engine.migrate.calls import CompiledNode, FoundCall
from quail_engine.migrate.cost import estimate, rate, render

ROWS = [("comfortable running shoes", "Great shoes, very comfortable"),
        ("The battery dies fast.", "Battery life is terrible."),
        ("I want a refund.", None)]  # a NULL argument: no prompt


class WordText:
    """PromptText's counting surface with one token per word."""

    model_name = "word-counter"

    def heads(self, texts):
        return [t.split() for t in texts]

    tails = tokenize = heads


@pytest.fixture()
def database(tmp_path):
    path = tmp_path / "dev.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE pairs (a VARCHAR, b VARCHAR)")
    con.executemany("INSERT INTO pairs VALUES (?, ?)", ROWS)
    con.close()
    return str(path)


def cost_of(sql: str, function: str, kind: str, database: str):
    node = CompiledNode("model.shop.m", "models/m.sql", "snowflake", sql, None)
    found = FoundCall("model.shop.m", "models/m.sql", function, "", kind, "unchanged", "")
    [model] = estimate([node], [found], database=database, text=WordText())
    [call] = model.calls
    return model, call


def test_a_similarity_is_three_prompts_per_row_and_timed_as_all(database):
    _, sim = cost_of("SELECT AI_SIMILARITY(a, b) AS s FROM pairs", "AI_SIMILARITY",
                     "ai_similarity", database)
    _, one = cost_of("SELECT AI_FILTER(PROMPT('Do {0} and {1} agree?', a, b)) AS f FROM pairs",
                     "AI_FILTER", "ai_filter", database)
    assert sim.note == one.note == ""
    assert one.prompts == 2 and sim.prompts == 6  # two rows without a NULL
    assert sim.input_tokens > 0
    for device in ("cpu", "gpu"):
        per_token = 1.0 / rate(device, "prefill").tokens_per_s
        assert getattr(one, f"{device}_seconds") == pytest.approx(one.input_tokens * per_token)
        assert getattr(sim, f"{device}_seconds") == pytest.approx(
            3 * sim.input_tokens * per_token)


def test_the_table_says_so(database):
    model, _ = cost_of("SELECT AI_SIMILARITY(a, b) AS s FROM pairs", "AI_SIMILARITY",
                       "ai_similarity", database)
    lines = render([model])
    assert lines[2].split()[2] == "6"  # the prompts column
    assert any("ai_similarity runs 3 prompts' work per row (2 asked, 1 content-free)" in line for line in lines)
