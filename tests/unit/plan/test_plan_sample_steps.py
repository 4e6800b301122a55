"""The samples a core takes before it is planned (plan/sampling.sample_steps), and the line
`quail explain` prints for them."""

import duckdb
import pytest

from quail_engine.exec.analyze import estimate_plans
from quail_engine.plan.cost import DeviceSpec, ModelSpec
from quail_engine.plan.sampling import (
    SAMPLE_PAIRS,
    SAMPLE_ROWS,
    SampleCandidate,
    SampleStep,
    sample_steps,
)
from quail_engine.sql.query import parse

F0 = SampleCandidate(0, "ai_filter", False, ("r",))
F1 = SampleCandidate(1, "ai_filter", False, ("r",))
HINTED = SampleCandidate(1, "ai_filter", True, ("r",))
JOIN = SampleCandidate(2, "ai_join", False, ("r", "p"))
CLASSIFY = SampleCandidate(3, "ai_classify", False, ("r",))

CASES = [
    # (operators, rows per relation, requested) -> samples
    ((F0, F1), {"r": 100}, 8, (SampleStep(0, SAMPLE_ROWS, 8), SampleStep(1, SAMPLE_ROWS, 8))),
    ((F0,), {"r": 100}, 8, ()),                          # one predicate: any rate, one plan
    ((F0, CLASSIFY), {"r": 100}, 8, ()),                 # a classification is no predicate
    ((F0, HINTED), {"r": 100}, 8, (SampleStep(0, SAMPLE_ROWS, 8),)),  # the hint wins
    ((F0, JOIN), {"r": 100, "p": 12}, 8,                  # a quarter of the smaller relation
     (SampleStep(0, SAMPLE_ROWS, 8), SampleStep(2, SAMPLE_PAIRS, 3))),
    ((F0, F1), {"r": 3}, 8, ()),                          # a tiny table: no sample pays
    ((F0, F1), {"r": 100}, 0, ()),                        # sampling off
]


@pytest.mark.parametrize("ops,rows,requested,expected", CASES)
def test_sample_steps(ops, rows, requested, expected):
    assert sample_steps(ops, rows, requested) == expected


def test_explain_names_the_samples_a_run_takes():
    con = duckdb.connect()
    con.execute("CREATE TABLE reviews AS SELECT i AS id, 'review number ' || i AS review "
                "FROM range(40) t(i)")
    sql = ("SELECT id FROM reviews WHERE ai_filter('Is it good? ' || review) "
           "AND ai_filter('Is it about price? ' || review)")
    model = ModelSpec("toy", 4, 64, 4, 1, 16, 128, 1000)
    (plan,) = estimate_plans(con, parse(sql, "duckdb"), model, DeviceSpec("toy", 1e11, 2e10))
    assert plan.text().splitlines()[3] == "sample before planning #0 8 rows, #1 8 rows"
    (plan,) = estimate_plans(con, parse(sql, "duckdb"), model, DeviceSpec("toy", 1e11, 2e10),
                             sample_size=0)
    assert not plan.samples
