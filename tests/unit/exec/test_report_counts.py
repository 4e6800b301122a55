"""The report counts rows: every NULL document (not one per distinct NULL), and the rows an
operator answered when DuckDB asked for them row by row (an ordered LIMIT's projection)."""

from __future__ import annotations

import duckdb
from exec_fakes import FakeEngine

from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec

TOY = DeviceSpec("toy", 1e11, 2e10)


def _con():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, review VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [
        (1, None), (2, None), (3, "great PRICE and a fair price"), (4, "awful lamp"),
        (5, "fine")])
    return con


def _op(sql: str) -> dict:
    session = QuailSession(_con(), FakeEngine, device_spec=TOY)
    session.execute(sql, "duckdb")
    (op,) = session.report.to_json()["operators"]
    return op


def test_each_null_document_counts():
    for sql in ("SELECT id, ai_classify(review, ['positive', 'negative']) FROM t",
                "SELECT id FROM t WHERE ai_filter(PROMPT('Does it mention PRICE? {0}', review))"):
        op = _op(sql)
        assert op["rows_in"] == 5 and op["nulls"] == 2, (sql, op)


def test_rows_answered_for_an_ordered_limit_are_counted():
    op = _op("SELECT id, ai_classify(review, ['positive', 'negative']) AS c FROM t "
             "ORDER BY id DESC LIMIT 3")
    assert op["prompts"] == 3 and op["rows_in"] == 3 and op["rows_out"] == 3, op
