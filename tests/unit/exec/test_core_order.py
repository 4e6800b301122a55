"""A core whose scan reads another core's AI operator (a CTE's classification filtered on its
label, then joined by an AI predicate: QUAIL-B's classify-then-filter shape) runs after that
core, so the classification is planned, not computed row by row inside DuckDB's scan."""

from exec_fakes import FakeEngine, review_db

from quail_engine.exec.session import QuailSession, dependency_order
from quail_engine.plan.cost import DeviceSpec
from quail_engine.sql.query import parse

REVIEWS = [(i, f"note {i} about the widget" if i % 2 else f"note {i} on a gadget battery", 1)
           for i in range(1, 13)]
PRODUCTS = [(1, "widget"), (1, "gadget"), (1, "battery")]
SQL = """
WITH c AS (SELECT r.id, r.review, ai_classify(r.review, ['widget', 'gadget']) AS kind
           FROM reviews AS r)
SELECT c.id, p.name FROM c JOIN products AS p
  ON ai_filter('Does {0} mention {1}?', c.review, p.name)
WHERE c.kind = 'gadget'
ORDER BY c.id, p.name"""


def test_the_cte_classification_runs_planned_before_the_join():
    parsed = parse(SQL, "duckdb")
    assert len(parsed.cores) == 2
    first = dependency_order(parsed.cores)[0]
    assert first.projections and not first.joins  # the classification's core goes first
    s = QuailSession(review_db(REVIEWS, PRODUCTS), FakeEngine, use_cache=False,
                     device_spec=DeviceSpec("toy", 1e11, 2e10))
    rows = s.execute(SQL, "duckdb").to_pylist()
    report = s.report.to_json()["operators"]
    assert all(o["unplanned"] == 0 for o in report), report
    assert rows and all(r["id"] % 2 == 0 for r in rows)  # only the 'gadget' reviews joined
