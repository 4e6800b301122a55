"""An AI join's selectivity is sampled on a few candidate pairs like a filter's (it was kept at
the default 0.5), and the sampled answers are not asked again."""

from exec_fakes import FakeEngine, ajoin, join_query, review_db

from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec

REVIEWS = [(i, f"note {i} about the widget battery" if i % 3 else f"note {i} on a gadget",
            1 + i % 2) for i in range(1, 25)]
PRODUCTS = [(1 + i % 2, name) for i, name in enumerate(
    "widget gadget battery screen cable charger speaker remote case stand lamp mouse keyboard "
    "camera tripod router".split())]


def test_join_selectivity_comes_from_a_sample_and_its_answers_are_kept():
    engine = FakeEngine()
    parsed = join_query(ajoin())
    s = QuailSession(review_db(REVIEWS, PRODUCTS), lambda: engine, use_cache=False,
                     device_spec=DeviceSpec("toy", 1e11, 2e10), sample_size=8)
    s.parse = lambda sql, dialect: parsed
    rows = s.execute(parsed.duckdb_sql).to_pylist()
    op = s.report.to_json()["operators"][0]
    assert op["selectivity_source"] == "sample"
    assert op["selectivity_est"] != 0.5
    candidates = sum(1 for r in REVIEWS for p in PRODUCTS if r[2] == p[0])
    assert op["prompts"] == candidates  # sampled pairs were not asked a second time
    assert 0 < len(rows) < candidates
