"""A CTE's classification that the outer query filters on, seen through (sql/label_ctes.py), on
the real default model (CPU, float32): the same rows as the statement run unplanned (every call
answered where DuckDB evaluates it), no operator answered row by row, and each review classified
once (the CTE's own core finds the outer core's answers)."""

import pytest

from quail_engine.exec.config import SessionConfig
from quail_engine.exec.session import QuailSession

pytestmark = pytest.mark.model

SENTIMENT = "AI_CLASSIFY(r.review, ['positive', 'negative']):labels[0]::STRING"
CTE = f"WITH c AS (SELECT r.id, r.review, {SENTIMENT} AS sentiment FROM reviews AS r) "
QUERIES = {
    "classify_then_classify": CTE + (
        "SELECT c.id, c.sentiment, AI_CLASSIFY(c.review, ['price', 'quality', 'looks'])"
        ":labels[0]::STRING AS topic FROM c WHERE c.sentiment IN ('negative', 'positive') "
        "ORDER BY c.id"),
    "classify_then_join": CTE + (
        "SELECT c.id, p.name FROM c JOIN products AS p ON AI_FILTER(PROMPT("
        "'Is the review {0} about a {1}?', c.review, p.name)) WHERE c.sentiment <> 'negative' "
        "ORDER BY c.id, p.name"),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_seen_through_rows_equal_the_unplanned_statement(con, engine, name):
    sql = QUERIES[name]
    planned = QuailSession(con.cursor(), lambda: engine)
    rows = planned.execute(sql, "snowflake").to_pylist()
    plain = QuailSession(con.cursor(), lambda: engine,
                         SessionConfig(use_cache=False, plan=False, device="cpu"))
    assert plain.execute(sql, "snowflake").to_pylist() == rows
    assert planned.parsed.cores[0].ops  # the outer core saw through the CTE
    report = {o["op"]: o for o in planned.report.to_json()["operators"]}
    assert all(o["unplanned"] == 0 for o in report.values()), report
    (classify, _), = planned.parsed.cores[0].ops
    reviews = con.execute("SELECT count(DISTINCT review) FROM reviews").fetchone()[0]
    assert report[classify]["prompts"] == reviews
