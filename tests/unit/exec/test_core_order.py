"""A core whose scan reads another core's AI operator (a CTE's classification filtered on its
label, then joined by an AI predicate: QUAIL-B's classify-then-filter shape) runs after that
core, so the classification is planned, not computed row by row inside DuckDB's scan."""

from exec_fakes import FakeEngine, review_db

from quail_engine.exec.config import SessionConfig
from quail_engine.exec.session import QuailSession, dependency_order
from quail_engine.plan.cost import DeviceSpec
from quail_engine.sql.query import parse

PAD = " ".join(["and so on"] * 20)  # words of under 4 letters: no answer changes (FakeEngine)
REVIEWS = [(i, (f"note {i} about the widget" if i % 2 else f"note {i} on a gadget battery")
            + " " + PAD, 1) for i in range(1, 13)]
PRODUCTS = [(1, "widget"), (1, "gadget"), (1, "battery")]
SQL = """
WITH c AS (SELECT r.id, r.review, ai_classify(r.review, ['widget', 'gadget']) AS kind
           FROM reviews AS r)
SELECT c.id, p.name FROM c JOIN products AS p
  ON ai_filter('Does {0} mention {1}?', c.review, p.name)
WHERE c.kind = 'gadget'
ORDER BY c.id, p.name"""


def _session():
    return QuailSession(review_db(REVIEWS, PRODUCTS), FakeEngine,
                        device_spec=DeviceSpec("toy", 1e11, 2e10))


def test_the_cte_classification_is_planned_inside_the_outer_core():
    """Seen through (sql/label_ctes.py): the outer core reads the reviews itself, the CTE's
    classification a filter of it, so a review's KV serves the classification and the join; the
    CTE's own core runs after it and finds every answer."""
    parsed = parse(SQL, "duckdb")
    assert len(parsed.cores) == 2
    first = dependency_order(parsed.cores)[0]
    assert first.filters and first.joins  # the classification's label filter, then the join
    (op_id, op), = first.ops
    assert op.pass_labels == ("gadget",) and op.bindings[0].alias == "c"
    assert parsed.ai_ops[op_id].pass_labels is None  # the statement's op is as written
    s = _session()
    rows = s.execute(SQL, "duckdb").to_pylist()
    report = {o["op"]: o for o in s.report.to_json()["operators"]}
    assert all(o["unplanned"] == 0 for o in report.values()), report
    assert rows and all(r["id"] % 2 == 0 for r in rows)  # only the 'gadget' reviews joined
    assert report[op_id]["rows_in"] == len(REVIEWS)  # asked once a review, by the filter
    assert report[op_id]["rows_out"] == len(REVIEWS) // 2
    fused = s.engine.stats.fresh_tokens
    # the same rows when the CTE cannot be seen through (a LIMIT in it): two cores, the
    # critical reviews encoded again by the join
    apart = SQL.replace("FROM reviews AS r)", "FROM reviews AS r LIMIT 1000)")
    assert len(dependency_order(parse(apart, "duckdb").cores)[0].joins) == 0
    s2 = _session()
    assert s2.execute(apart, "duckdb").to_pylist() == rows
    assert "join #0 p anchor=c reuse c:c.review" in s.report.plans[0]
    assert fused < s2.engine.stats.fresh_tokens
    plain = QuailSession(review_db(REVIEWS, PRODUCTS), FakeEngine,
                         SessionConfig(use_cache=False, plan=False, device="cpu"))
    assert plain.execute(SQL, "duckdb").to_pylist() == rows
