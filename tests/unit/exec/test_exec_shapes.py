"""Query shapes through the real SQL front end and DuckDB with the fake engine: the planned run
returns exactly what the unplanned run (every AI call evaluated where DuckDB evaluates it)
returns."""

import pytest
from exec_fakes import FakeEngine, review_db

from quail_engine.exec.config import SessionConfig
from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec

REVIEWS = [(i, text, pid) for i, (text, pid) in enumerate([
    ("widget works, good PRICE price", 1), ("gadget broke, awful", 2), (None, 1),
    ("the widget battery died", 1), ("gadget is lovely, fair price", 2),
    ("battery battery great", 3), ("nothing to report", 3), ("widget widget", 2)], start=1)]
PRODUCTS = [(1, "widget"), (2, "gadget"), (3, "battery"), (4, "lamp")]

SHAPES = [
    ("snowflake", "SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Mentions PRICE? {0}', review)) "
                  "AND id > 0 ORDER BY id"),
    ("snowflake", "WITH pos AS (SELECT * FROM reviews WHERE AI_FILTER(PROMPT('Is it GOOD? {0}', "
                  "review))) SELECT count(*) FROM pos"),
    ("snowflake", "SELECT r.id, p.name FROM reviews r JOIN products p ON r.product_id = "
                  "p.product_id AND AI_FILTER(PROMPT('Is {0} about {1}?', r.review, p.name)) "
                  "ORDER BY 1, 2"),
    ("snowflake", "SELECT r.id, p.name FROM reviews r, products p WHERE AI_FILTER(PROMPT("
                  "'Is {0} about {1}?', r.review, p.name)) AND AI_FILTER(PROMPT('Mentions "
                  "BATTERY? {0}', r.review)) ORDER BY 1, 2"),
    ("snowflake", "SELECT r.id, p.name FROM reviews r LEFT JOIN products p ON AI_FILTER(PROMPT("
                  "'Is {0} about {1}?', r.review, p.name)) ORDER BY 1, 2 NULLS FIRST"),
    ("snowflake", "SELECT p.name FROM products p WHERE EXISTS (SELECT 1 FROM reviews r WHERE "
                  "AI_FILTER(PROMPT('Is {0} about {1}?', r.review, p.name))) ORDER BY 1"),
    ("snowflake", "SELECT p.name FROM products p WHERE NOT EXISTS (SELECT 1 FROM reviews r "
                  "WHERE AI_FILTER(PROMPT('Is {0} about {1}?', r.review, p.name))) ORDER BY 1"),
    ("snowflake", "SELECT AI_CLASSIFY(review, ['widget', 'gadget']):labels[0]::STRING AS k, "
                  "count(*) AS n FROM reviews GROUP BY k ORDER BY k NULLS FIRST"),
    ("bigquery", "SELECT id, AI.GENERATE(('Say: ', review)).result AS s FROM reviews "
                 "WHERE AI.IF(('Mentions WIDGET? ', review)) OR id = 2 ORDER BY id"),
    ("databricks", "SELECT id, row_number() OVER (ORDER BY id DESC) AS rn FROM reviews WHERE "
                   "ai_classify(CONCAT('GADGET? ', review), ARRAY('yes', 'no')) = 'yes' "
                   "ORDER BY id"),
    ("duckdb", "SELECT r.id, p.name, q.name AS other FROM reviews r JOIN products p ON "
               "r.product_id = p.product_id JOIN products q ON ai_filter('Is ' || r.review || "
               "' about ' || q.name || '?') WHERE ai_filter('BATTERY? ' || r.review) "
               "ORDER BY 1, 2, 3"),
]


@pytest.fixture
def con():
    c = review_db(REVIEWS, PRODUCTS)
    return c


def _planned_and_plain(con):
    """The planner's session and the row-by-row one (no plan, no shared KV) on a toy device."""
    dev = DeviceSpec("toy", 1e11, 1e10)
    planned = QuailSession(con, FakeEngine,
                           SessionConfig(use_cache=False, sample_size=2, device="cpu"),
                           device_spec=dev)
    plain = QuailSession(con, FakeEngine,
                         SessionConfig(use_cache=False, plan=False, share_kv=False, device="cpu"),
                         device_spec=dev)
    return planned, plain


@pytest.mark.parametrize("dialect,sql", SHAPES)
def test_planned_equals_unplanned(con, dialect, sql):
    planned, plain = _planned_and_plain(con)
    expected = plain.execute(sql, dialect).to_pylist()
    assert planned.execute(sql, dialect).to_pylist() == expected


LITERAL_ARGUMENT = [  # the argument a dbt macro writes as a string ('delivery')
    ("snowflake", "SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Is {0} about {1}?', review, "
                  "'PRICE')) ORDER BY id"),
    ("snowflake", "SELECT r.id, p.name FROM reviews r JOIN products p ON AI_FILTER(PROMPT("
                  "'Is {0} about {1} ({2})?', r.review, p.name, 'BATTERY')) ORDER BY 1, 2"),
    ("snowflake", "SELECT id, AI_COMPLETE('m', PROMPT('Say {1}: {0}', review, 'WIDGET')) AS s "
                  "FROM reviews ORDER BY id"),
]




ROW_CLAUSES = [  # AI calls DuckDB asks of every row or group: planned as the core's projections
    ("snowflake", "SELECT id FROM reviews WHERE id > 1 ORDER BY AI_FILTER(PROMPT('Mentions "
                  "PRICE? {0}', review)) DESC NULLS LAST, id"),
    ("snowflake", "SELECT id FROM reviews WHERE CASE WHEN id > 3 THEN AI_FILTER(PROMPT("
                  "'Mentions BATTERY? {0}', review)) ELSE id = 1 END ORDER BY id"),
    ("snowflake", "SELECT review, count(*) AS n FROM reviews GROUP BY review HAVING AI_FILTER("
                  "PROMPT('Mentions WIDGET? {0}', review)) ORDER BY review"),
    ("snowflake", "SELECT id FROM reviews QUALIFY AI_FILTER(PROMPT('Is it GOOD? {0}', review)) "
                  "AND row_number() OVER (PARTITION BY product_id ORDER BY id) = 1 ORDER BY id"),
    ("bigquery", "SELECT id FROM reviews WHERE id < 7 ORDER BY AI.SCORE(('Rate from 1 to 10 "
                 "how GOOD: ', review)), id"),
]


@pytest.mark.parametrize("dialect,sql", LITERAL_ARGUMENT + ROW_CLAUSES)
def test_planned_with_nothing_answered_row_by_row(con, dialect, sql):
    """A literal argument, and calls in row clauses, are planned: the same rows as the
    unplanned run, and no call answered by DuckDB a vector at a time."""
    planned, plain = _planned_and_plain(con)
    expected = plain.execute(sql, dialect).to_pylist()
    assert planned.execute(sql, dialect).to_pylist() == expected and expected
    assert [o.unplanned for o in planned.report.ops.values()] == [0]
