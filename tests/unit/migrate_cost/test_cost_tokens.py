"""The cost estimate's token counts on a real DuckDB file with the embedded model's tokenizer:
what each AI call of a model would read, whole or extrapolated from a sample, pairs for a join,
and nothing guessed without data."""

from __future__ import annotations

import duckdb
import pytest

from quail_engine.exec.model_quirks import pair_layout_for
from quail_engine.exec.prompts import DEFAULT_MAX_TOKENS, OpPrompt
from quail_engine.migrate.calls import CompiledNode, FoundCall
from quail_engine.migrate.cost import estimate, rate, render
from quail_engine.sql.query import parse

pytestmark = pytest.mark.model
FILTER = "SELECT id FROM dev.main.reviews WHERE AI_FILTER(PROMPT('Is {0} about shoes?', review))"
JOIN = ("SELECT r.id, t.tid FROM reviews r JOIN topics t ON r.shop = t.shop "
        "AND AI_FILTER(PROMPT('Does {0} mention {1}?', r.review, t.topic))")
GENERATE = "SELECT AI_COMPLETE('llama3.1-8b', CONCAT('Summarize: ', review)) AS s FROM reviews"
REVIEWS = ["Great shoes, they fit well.", "The laces broke after a week.",
           "Fast delivery and a nice box.", None, "Too small; sent them back for a refund."]


@pytest.fixture(scope="module")
def text(require_embedded):
    require_embedded("gemma3-270m")
    from quail_engine.exec.facade import SessionConfig, model_text

    return model_text(SessionConfig(use_cache=False))[0]


@pytest.fixture()
def database(tmp_path):
    path = tmp_path / "dev.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE reviews (id INTEGER, shop INTEGER, review VARCHAR)")
    con.executemany("INSERT INTO reviews VALUES (?, ?, ?)",
                    [(i, i % 2, r) for i, r in enumerate(REVIEWS)])
    con.execute("CREATE TABLE topics AS SELECT * FROM (VALUES (1, 0, 'laces'), (2, 1, 'fit'), "
                "(3, 1, 'delivery')) AS t(tid, shop, topic)")
    con.execute("CREATE TABLE big AS SELECT range AS id, 'review ' || (range % 10) || ' of "
                "the same length' AS review FROM range(400)")
    con.close()
    return str(path)


def node(name: str, sql: str | None, error: str | None = None) -> CompiledNode:
    return CompiledNode(f"model.shop.{name}", f"models/{name}.sql", "snowflake", sql, error)


def call(name: str, function: str, kind: str | None) -> FoundCall:
    return FoundCall(f"model.shop.{name}", f"models/{name}.sql", function, "", kind,
                     "unchanged", "")


def prompt_tokens(text, sql: str, rows: list[tuple]) -> list[int]:
    """The reference: each row's prompt as the executor lays it out, tokenized as one chat."""
    op = parse(sql, "snowflake").ai_ops[0]
    layout = OpPrompt.for_op(op, pair_layout_for(text.model_name))
    return [sum(map(len, text.codec.chat_split(*layout.texts(v)))) for v in rows]


def test_filter_reads_every_non_null_row_whole(text, database):
    [cost] = estimate([node("shoes", FILTER)], [call("shoes", "AI_FILTER", "ai_filter")],
                      database=database, text=text)
    [c] = cost.calls
    kept = [(r,) for r in REVIEWS if r is not None]
    assert (c.prompts, c.is_extrapolated, c.output_tokens) == (4, False, None)
    assert c.input_tokens == sum(prompt_tokens(text, FILTER, kept))
    assert c.gpu_seconds == pytest.approx(c.input_tokens / 121_172.0)
    assert c.cpu_seconds == pytest.approx(c.input_tokens / rate("cpu", "prefill").tokens_per_s)


def test_a_filter_with_a_literal_argument_is_counted(text, database):
    # as the Snowflake project's macro writes it: the topic is the prompt's second argument
    sql = ("SELECT id FROM \"compile\".\"main\".\"reviews\" WHERE "
           "AI_FILTER(PROMPT('Review: {0}\\nIs this review about {1}?', review, 'delivery'))")
    [cost] = estimate([node("delivery", sql)], [call("delivery", "AI_FILTER", "ai_filter")],
                      database=database, text=text)
    [c] = cost.calls
    kept = [(r, "delivery") for r in REVIEWS if r is not None]
    assert (c.note, c.prompts, c.is_extrapolated) == ("", 4, False)
    assert c.input_tokens == sum(prompt_tokens(text, sql, kept))


def test_a_larger_table_is_sampled_and_extrapolated(text, database):
    # named as dbt compiled it against another DuckDB file (quail migrate's scratch one)
    sql = ('SELECT id FROM "compile"."main"."big" '
           "WHERE AI_FILTER(PROMPT('Is {0} about shoes?', review))")
    [whole] = estimate([node("big", sql)], [call("big", "AI_FILTER", "ai_filter")],
                       database=database, text=text, sample_rows=1000)
    [sampled] = estimate([node("big", sql)], [call("big", "AI_FILTER", "ai_filter")],
                         database=database, text=text, sample_rows=50)
    assert not whole.is_extrapolated and sampled.is_extrapolated
    assert sampled.calls[0].sampled_rows == 50 and sampled.calls[0].prompts == 400
    per_row = prompt_tokens(text, sql, [("review 0 of the same length",)])[0]
    assert whole.input_tokens == sampled.input_tokens == 400 * per_row  # every row equally long
    assert "~" in render([sampled])[2] and "~" not in render([whole])[2]


def test_a_join_reads_its_candidate_pairs(text, database):
    [cost] = estimate([node("mentions", JOIN)], [call("mentions", "AI_FILTER", "ai_join")],
                      database=database, text=text)
    [c] = cost.calls
    reviews = [(r, s) for i, r in enumerate(REVIEWS) if r is not None for s in [i % 2]]
    topics = [("laces", 0), ("fit", 1), ("delivery", 1)]
    pairs = [(r, t) for r, rs in reviews for t, ts in topics if rs == ts]  # r.shop = t.shop
    assert c.op_kind == "ai_join" and c.prompts == len(pairs) == 5
    assert c.input_tokens == sum(prompt_tokens(text, JOIN, pairs))
    assert c.gpu_seconds == pytest.approx(c.input_tokens / (735.3e6 / 60))


def test_generate_counts_its_output_as_an_upper_bound(text, database):
    [cost] = estimate([node("summaries", GENERATE)],
                      [call("summaries", "AI_COMPLETE", "ai_generate")],
                      database=database, text=text)
    [c] = cost.calls
    assert c.output_tokens == 4 * DEFAULT_MAX_TOKENS and c.is_decode_excluded
    line = next(x for x in render([cost]) if x.startswith("model.shop.summaries"))
    assert f"<={4 * DEFAULT_MAX_TOKENS}" in line and "s+" in line


def test_without_data_the_tokens_are_unknown(text):
    [cost] = estimate([node("shoes", FILTER)], [call("shoes", "AI_FILTER", "ai_filter")],
                      database=None, text=text)
    assert cost.input_tokens is None and cost.gpu_seconds is None
    assert cost.note == "tokens unknown: no database given"
    lines = render([cost])
    assert "unknown" in lines[2] and "model.shop.shoes: tokens unknown: no database given" in lines


def test_each_model_stands_alone(text, database):
    missing = "SELECT id FROM nowhere WHERE AI_FILTER(PROMPT('Is {0} ok?', review))"
    costs = estimate([node("shoes", FILTER), node("gone", missing), node("broken", None, "oops"),
                      node("plain", "SELECT 1")],
                     [call("shoes", "AI_FILTER", "ai_filter"), call("gone", "AI_FILTER", "ai_filter"),
                      call("broken", "AI_FILTER", "ai_filter")],
                     database=database, text=text)
    assert [c.node.split(".")[-1] for c in costs] == ["shoes", "gone", "broken"]
    assert costs[0].input_tokens > 0
    assert costs[1].input_tokens is None and "nowhere" in costs[1].calls[0].note
    assert costs[2].note == "tokens unknown: it does not compile (oops)"


def test_a_call_on_a_relational_joins_rows_is_not_counted_as_pairs(text, database):
    sql = ("SELECT AI_COMPLETE('llama3.1-8b', CONCAT(r.review, t.topic)) AS s "
           "FROM reviews r JOIN topics t ON r.shop = t.shop")
    [cost] = estimate([node("joined", sql)], [call("joined", "AI_COMPLETE", "ai_generate")],
                      database=database, text=text)
    assert cost.input_tokens is None
    assert "rows of a join" in cost.calls[0].note
