"""An AI join's selectivity is sampled on a few candidate pairs like a filter's when the plan
has a choice it decides (another AI predicate in the core), and the sampled answers are not asked
again; a lone join is planned the same at any selectivity and is not sampled."""

from exec_fakes import FakeEngine, ajoin, bfilter, join_query, review_db

from quail_engine.exec.config import SessionConfig
from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec

REVIEWS = [(i, f"note {i} about the widget battery" if i % 3 else f"note {i} on a gadget",
            1 + i % 2) for i in range(1, 25)]
PRODUCTS = [(1 + i % 2, name) for i, name in enumerate(
    "widget gadget battery screen cable charger speaker remote case stand lamp mouse keyboard "
    "camera tripod router".split())]


def _run(parsed, engine):
    s = QuailSession(review_db(REVIEWS, PRODUCTS), lambda: engine,
                     SessionConfig(use_cache=False, sample_size=8, device="cpu"),
                     device_spec=DeviceSpec("toy", 1e11, 2e10))
    s.parse = lambda sql, dialect: parsed
    rows = s.execute(parsed.duckdb_sql).to_pylist()
    return rows, {o["op"]: o for o in s.report.to_json()["operators"]}


CANDIDATES = sum(1 for r in REVIEWS for p in PRODUCTS if r[2] == p[0])


def test_join_selectivity_comes_from_a_sample_and_its_answers_are_kept():
    # the filter passes every review (each says "note"), so the join asks every candidate pair
    parsed = join_query(ajoin(), review_filter=bfilter("Mentions NOTE?", sel=0.9))
    rows, ops = _run(parsed, FakeEngine())
    assert ops[1]["rows_out"] == len(REVIEWS)
    assert ops[0]["selectivity_source"] == "sample"
    assert ops[0]["selectivity_est"] != 0.5
    assert ops[0]["prompts"] == CANDIDATES  # sampled pairs were not asked a second time
    assert 0 < len(rows) < CANDIDATES


def test_a_lone_join_is_not_sampled():
    engine = FakeEngine()
    rows, ops = _run(join_query(ajoin()), engine)
    assert ops[0]["selectivity_source"] == "default"
    assert ops[0]["prompts"] == CANDIDATES
    assert 0 < len(rows) < CANDIDATES
