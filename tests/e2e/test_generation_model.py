"""Generated text on the default model is written by the embedded instruct model: the default
(a base model) copied the review or rambled when asked to summarize (bigquery/generate.sql:
text within the word limit on 0 of 5 before; bench/results/pair-accuracy.md)."""

from pathlib import Path

import pytest

from quail_engine.exec.facade import SessionConfig, connect, open_session

pytestmark = pytest.mark.model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REVIEWS = EXAMPLES / "data" / "reviews.csv"


def run(sql: str, dialect: str, **config):
    con = connect([("reviews", str(REVIEWS))])
    session = open_session(con, SessionConfig(use_cache=False, **config))
    rows = session.execute(sql, dialect).to_pylist()
    return rows, session


def test_summaries_on_the_default_model_are_short_and_not_the_review(require_embedded):
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    reviews = {r[0]: r[1] for r in connect([("reviews", str(REVIEWS))]).execute(
        "SELECT id, review FROM reviews").fetchall()}
    rows, session = run((EXAMPLES / "bigquery" / "generate.sql").read_text(), "bigquery")
    assert session.report.generation_model == "smollm2-135m"
    assert [r["id"] for r in rows] == [1, 2, 3, 4, 5]
    for r in rows:
        words = r["summary"].split()
        assert 0 < len(words) <= 12, r
        assert r["summary"].strip() != reviews[r["id"]].strip()


def test_the_default_model_writes_when_asked_and_the_writer_loads_only_for_text(require_embedded):
    require_embedded("gemma3-270m")
    sql = ("SELECT id FROM reviews WHERE id <= 2 AND "
           "AI_FILTER(PROMPT('Is this review positive? {0}', review))")
    _, session = run(sql, "snowflake")
    assert session.report.generation_model == ""
    assert session._decoder is not None and session._decoder.loaded is None  # never loaded
    gen = ("SELECT AI_COMPLETE('m', PROMPT('Summarize: {0}', review), {'max_tokens': 4}) AS s "
           "FROM reviews WHERE id = 1")
    _, session = run(gen, "snowflake", generation_model="default")
    assert session.report.generation_model == "" and session._decoder is None
