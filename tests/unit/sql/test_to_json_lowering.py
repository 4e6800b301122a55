"""BigQuery's TO_JSON (a JSON value) transpiled into DuckDB is DuckDB's JSON-typed to_json, not
sqlglot's `CAST(TO_JSON(x) AS TEXT)` (TO_JSON_STRING's text, which stays)."""

import pytest

from quail_engine.sql import transpile

CASES = [
    ("SELECT TO_JSON(STRUCT(1 AS a)) AS j FROM t", "SELECT TO_JSON({'a': 1}) AS j FROM t"),
    ("SELECT TO_JSON(x) AS j FROM t", "SELECT TO_JSON(x) AS j FROM t"),
    ("SELECT TO_JSON_STRING(STRUCT(1 AS a)) AS j FROM t",
     "SELECT CAST(TO_JSON({'a': 1}) AS TEXT) AS j FROM t"),
]


@pytest.mark.parametrize("bigquery,duckdb", CASES, ids=[c[0] for c in CASES])
def test_bigquery_to_json_into_duckdb(bigquery, duckdb):
    assert transpile(bigquery, "bigquery", "duckdb") == duckdb
