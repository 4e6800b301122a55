"""`NOT <AI predicate>` (Snowflake's `NOT AI_FILTER(...)`, Databricks' `= 'FALSE'`) is planned as
the filter or join of the same prompt with the complement's selectivity, rows answering FALSE
passing; it is not answered row by row inside DuckDB. Rows match the unplanned spelling
`NOT (... IS TRUE)` (the same on non-NULL answers)."""

import pytest
from exec_fakes import FakeEngine, review_db

from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec
from quail_engine.sql.query import parse

PRICE = "AI_FILTER(PROMPT('Does this review mention PRICE? {0}', r.review))"
PRICE_90 = "AI_FILTER(PROMPT('Does this review mention PRICE? {0}', r.review), {'selectivity': 0.9})"
BATTERY = "AI_FILTER(PROMPT('Is the BATTERY good? {0}', r.review), {'selectivity': 0.5})"
MENTION = "AI_FILTER(PROMPT('Does {0} mention {1}?', r.review, p.name))"
REVIEWS = [(i, text, 1) for i, text in enumerate(
    ["price and price", "battery battery", "price price battery battery", "none",
     "battery battery price", "great price price", "one battery", "gadget"] * 2)]
PRODUCTS = [(1, "widget"), (1, "gadget"), (1, "battery")]


@pytest.mark.parametrize("where, planned, negated", [
    ("NOT " + PRICE, [0], True),
    ("NOT (" + PRICE + " = TRUE)", [0], True),
    (PRICE, [0], False),
    ("NOT (" + PRICE + " IS TRUE)", [], False),   # holds for NULL answers: a projection
    ("NOT (" + PRICE + " OR r.id > 3)", [], False),
])
def test_not_of_an_ai_filter_is_its_planned_filter_marked_negated(where, planned, negated):
    parsed = parse(f"SELECT r.id FROM reviews AS r WHERE {where}", "snowflake")
    assert [f for c in parsed.cores for f in c.filters] == planned
    assert parsed.ai_ops[0].negated is negated


def test_not_in_join_on_is_a_planned_negated_ai_join():
    parsed = parse(f"SELECT r.id, p.name FROM reviews AS r JOIN products AS p ON NOT {MENTION}",
                   "snowflake")
    assert [c.joins for c in parsed.cores] == [(0,)]
    assert parsed.ai_ops[0].negated and parsed.ai_ops[0].op == "ai_join"


def _run(sql):
    session = QuailSession(review_db(REVIEWS, PRODUCTS), FakeEngine,
                           device_spec=DeviceSpec("toy", 1e11, 2e10))
    rows = session.execute(sql, "snowflake").to_pylist()
    return rows, session.report.to_json()


def test_negated_filter_runs_planned_first_at_the_complement_selectivity():
    """NOT of a predicate that holds for 90% of rows keeps 10%: it runs before a 50% filter."""
    sql = f"SELECT r.id FROM reviews AS r WHERE NOT {PRICE_90} AND {BATTERY} ORDER BY r.id"
    rows, report = _run(sql)
    reference, _ = _run(sql.replace(f"NOT {PRICE_90}", f"NOT ({PRICE} IS TRUE)"))
    assert rows == reference and rows == [{"id": i} for i in (6, 14)]
    ops = {o["op"]: o for o in report["operators"]}
    assert all(o["unplanned"] == 0 for o in ops.values()), ops
    assert ops[0]["selectivity_est"] == pytest.approx(0.1)
    order = [line.split()[1] for line in report["plans"][0].splitlines()
             if line.startswith("filter #")]
    assert order == ["#0", "#1"]
    assert ops[0]["rows_in"] == len(REVIEWS) and ops[1]["rows_in"] == ops[0]["rows_out"]


def test_negated_join_runs_planned_with_the_pairs_that_answer_false():
    sql = (f"SELECT r.id, p.name FROM reviews AS r JOIN products AS p ON NOT {MENTION} "
           "ORDER BY r.id, p.name")
    rows, report = _run(sql)
    reference, _ = _run(sql.replace(f"NOT {MENTION}", f"NOT ({MENTION} IS TRUE)"))
    assert rows == reference and 0 < len(rows) < len(REVIEWS) * len(PRODUCTS)
    assert all(o["unplanned"] == 0 for o in report["operators"]), report["operators"]


def test_negated_filter_under_limit_returns_only_rows_that_answer_false():
    """The filter stops once LIMIT rows pass; the rows it never asked must not pass `NOT`."""
    everyone, _ = _run(f"SELECT r.id FROM reviews AS r WHERE NOT ({PRICE} IS TRUE)")
    rows, report = _run(f"SELECT r.id FROM reviews AS r WHERE NOT {PRICE} LIMIT 2")
    assert len(rows) == 2 and all(r in everyone for r in rows), (rows, everyone)
    assert report["operators"][0]["rows_in"] < len(REVIEWS)  # stopped early, planned


@pytest.mark.parametrize("negated, expected", [(False, [True, False]), (True, [True, None])])
def test_a_row_the_plan_never_asked_fails_the_conjunct_either_way(negated, expected):
    """A filter stopped by LIMIT, or a row another conjunct eliminated, is not in the store:
    its lookup must not make `NOT <predicate>` hold (FALSE would, NULL does not)."""
    from quail_engine.exec.answer_store import AnswerStore
    from quail_engine.exec.keyed_answers import keyed_answer
    from quail_engine.exec.report import Report

    op = parse("SELECT r.id FROM reviews AS r WHERE " + ("NOT " if negated else "") + PRICE,
               "snowflake").ai_ops[0]
    store = AnswerStore()
    store.put(0, ("asked",), True)
    store.complete.add(0)
    answer = keyed_answer(0, op, store, [{1: "asked", 2: "never asked"}], Report())
    assert answer([(1,), (2,)]) == expected
