"""BigQuery's TO_JSON is a JSON value in a run, as in BigQuery: over a STRUCT an object whose
fields a path reads, also inside another JSON object. It ran as VARCHAR (sqlglot writes it as
DuckDB's `CAST(TO_JSON(x) AS TEXT)`), so the `response` of a Snowflake AI_EXTRACT transpiled into
BigQuery and run back held a JSON string of the object, and `$.response.name` read NULL."""

from __future__ import annotations

import json

import duckdb
import pytest

from quail_engine.exec.facade import SessionConfig, open_session
from quail_engine.sql import transpile
from quail_engine.sql.errors import UnsupportedError

DUCKDB_TYPE = b"quail.duckdb_type"


@pytest.fixture(scope="module")
def session():
    con = duckdb.connect()
    con.execute("CREATE TABLE reviews AS SELECT * FROM (VALUES (1, 'Alice paid 45 dollars in "
                "Paris.'), (2, 'Bob wants a refund.')) AS t(id, review)")
    return open_session(con, SessionConfig(use_cache=False, precision="fp32"))


def _duckdb_type(table, column: str) -> str | None:
    noted = (table.schema.field(column).metadata or {}).get(DUCKDB_TYPE)
    return None if noted is None else noted.decode()


CASES = [
    # (BigQuery expression, its DuckDB type (None: not JSON), its value)
    ("TO_JSON(STRUCT(1 AS a, 'x' AS b))", "JSON", '{"a":1,"b":"x"}'),
    ("JSON_QUERY(JSON_OBJECT('o', TO_JSON(STRUCT(1 AS a))), '$.o.a')", "JSON", "1"),
    ("JSON_VALUE(JSON_OBJECT('o', TO_JSON(STRUCT('x' AS b))), '$.o.b')", None, "x"),
    ("TO_JSON_STRING(STRUCT(1 AS a))", None, '{"a":1}'),
]


@pytest.mark.parametrize("expr,duckdb_type,value", CASES, ids=[c[0] for c in CASES])
def test_to_json_is_a_json_value(session, expr, duckdb_type, value):
    table = session.execute(f"SELECT {expr} AS v", "bigquery")
    assert _duckdb_type(table, "v") == duckdb_type
    assert table.column("v").to_pylist() == [value]


def test_to_json_with_an_option_is_refused_by_name(session):
    with pytest.raises(UnsupportedError, match="stringify_wide_numbers"):
        session.execute("SELECT TO_JSON(STRUCT(1 AS a), stringify_wide_numbers => TRUE) AS v",
                        "bigquery")


@pytest.mark.model
def test_snowflake_extract_transpiled_into_bigquery_runs_back_as_an_object(session):
    bigquery = transpile("SELECT id, AI_EXTRACT(review, {'name': 'Who is named?'}) AS e "
                         "FROM reviews", "snowflake", "bigquery")
    assert "TO_JSON(STRUCT(" in bigquery
    table = session.execute(f"SELECT id, e, JSON_VALUE(e, '$.response.name') AS name "
                            f"FROM ({bigquery}) AS x ORDER BY id", "bigquery")
    assert _duckdb_type(table, "e") == "JSON"
    rows = table.to_pylist()
    assert [r["id"] for r in rows] == [1, 2]
    for row in rows:
        response = json.loads(row["e"])["response"]
        assert isinstance(response, dict) and set(response) == {"name"}
        assert row["name"] == response["name"]
    assert any(row["name"] for row in rows)
