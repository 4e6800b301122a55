"""An AI projection that reads both sides of an AI join (QUAIL-B IMDB-15: the sentiment of a
review toward the aspect it was joined with) is answered by the plan for the joined pairs, not
row by row inside DuckDB's final statement."""

from exec_fakes import FakeEngine, review_db

from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec

REVIEWS = [(i, f"note {i} about the widget" if i % 2 else f"note {i} on a gadget battery", 1)
           for i in range(1, 9)]
PRODUCTS = [(1, "widget"), (1, "gadget"), (1, "battery")]
SQL = """
SELECT r.id, p.name,
       AI_CLASSIFY(PROMPT('How does {0} rate {1}?', r.review, p.name),
                   ['widget', 'gadget']):labels[0]::STRING AS rating
FROM reviews AS r
JOIN products AS p ON AI_FILTER(PROMPT('Does {0} mention {1}?', r.review, p.name))
ORDER BY r.id, p.name"""


def test_a_projection_over_joined_pairs_runs_planned():
    s = QuailSession(review_db(REVIEWS, PRODUCTS), FakeEngine, use_cache=False,
                     device_spec=DeviceSpec("toy", 1e11, 2e10))
    rows = s.execute(SQL, "snowflake").to_pylist()
    ops = s.report.to_json()["operators"]
    assert rows and all(r["rating"] in ("widget", "gadget") for r in rows)
    assert all(o["unplanned"] == 0 for o in ops), ops
    classify = next(o for o in ops if o["kind"] == "ai_classify")
    assert classify["rows_in"] == len(rows)
