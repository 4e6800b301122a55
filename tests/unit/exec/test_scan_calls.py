"""A relation's scan that calls AI functions itself (a CTE the outer query's AI call reads, which
planning cannot see through) runs from the scan's tree, its calls renamed to the statement's
functions and their arguments cast as in the statement; a join's equality keys restrict its
pairs from their trees: no SQL text of ours is parsed again."""

import pytest
from exec_fakes import FakeEngine, review_db

from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec
from quail_testing.sql_guard import refuse_written_text

REVIEWS = [(i, f"note {i} about the " + ("gadget battery" if i % 2 else "widget"), i % 3)
           for i in range(1, 9)]
CLASSIFIED = """
WITH c AS (SELECT r.id, r.review, AI_CLASSIFY(r.review, ['widget', 'gadget']):labels[0]::STRING
           AS kind FROM reviews AS r LIMIT 1000)
SELECT c.id FROM c
WHERE AI_FILTER(PROMPT('Does {0} mention a BATTERY?', c.review)) AND c.kind = 'gadget'
ORDER BY c.id"""
# an aggregate's groups reach its function as lists inside the scan too
SUMMARIZED = """
WITH g AS (SELECT r.product_id, AI_AGG(r.review, 'Summarize') AS s FROM reviews AS r
           GROUP BY r.product_id)
SELECT g.product_id FROM g WHERE AI_FILTER(PROMPT('Is {0} ABOUT anything?', g.s)) ORDER BY 1"""
# the pairs with equal product ids whose review names the product: its equality is a key
# column of both scans
JOINED = """
SELECT r.id FROM reviews AS r JOIN products AS p ON r.product_id = p.product_id
AND AI_FILTER(PROMPT('Does {0} mention {1}?', r.review, p.name)) ORDER BY r.id"""
PRODUCTS = [(0, "gadget"), (1, "widget"), (2, "gadget battery")]


@pytest.fixture
def no_reading_back(monkeypatch):
    refuse_written_text(monkeypatch)


@pytest.mark.parametrize("sql, rows", [(CLASSIFIED, [1, 3, 5, 7]), (SUMMARIZED, [0, 1, 2]),
                                       (JOINED, [3, 4, 5])],
                         ids=["classification in a CTE", "aggregate in a CTE",
                              "join with an equality"])
def test_a_scan_calling_ai_functions_runs_from_its_tree(no_reading_back, sql, rows):
    session = QuailSession(review_db(REVIEWS, PRODUCTS), FakeEngine,
                           device_spec=DeviceSpec("toy", 1e11, 2e10))
    got = session.execute(sql, "snowflake").to_pylist()
    assert [next(iter(r.values())) for r in got] == rows
