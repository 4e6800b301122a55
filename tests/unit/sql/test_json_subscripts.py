"""A subscript of a JSON value in Snowflake and Databricks SQL counts from 0 as the vendors do,
run by the real DuckDB (sqlglot alone shifted it for DuckDB's 1-based lists, and left
`v -> '$.labels'[1]` unparenthesized: the whole object)."""

import duckdb
import pytest

from quail_engine.sql.query import parse

OBJ = """parse_json('{"labels": ["a", "b"]}')"""
ARR = """parse_json('[{"answer": "John"}, {"answer": "Ann"}]')"""


@pytest.mark.parametrize("dialect,sql,value", [
    ("snowflake", f"SELECT GET({OBJ}, 'labels')[0]::string AS x", "a"),
    ("snowflake", f"SELECT GET({OBJ}, 'labels')[1]::string AS x", "b"),
    ("snowflake", f"SELECT {OBJ}:labels[1]::string AS x", "b"),
    ("snowflake", f"SELECT {ARR}[1]:answer::string AS x", "Ann"),
    ("snowflake", f"SELECT GET({ARR}, 0):answer::string AS x", "John"),
    ("snowflake", "SELECT ARRAY_CONSTRUCT(10, 20)[0] AS x", 10),  # an array, not JSON
    ("databricks", """SELECT parse_json('{"a": ["x", "y"]}'):a[1]::string AS x""", "y"),
])
def test_subscripts_count_as_the_vendor_does(dialect, sql, value):
    assert duckdb.connect().execute(parse(sql, dialect).duckdb_sql).fetchone()[0] == value


def test_a_subscript_of_an_ai_result_in_json_is_a_path_step():
    """EXTRACT_ANSWER returns a JSON array: its [0] is the first answer, as a JSON path."""
    sql = "SELECT SNOWFLAKE.CORTEX.EXTRACT_ANSWER(txt, 'Who?')[0]:answer::string AS a FROM r"
    duckdb_sql = parse(sql, "snowflake").duckdb_sql
    assert "END -> '$[0]') ->> '$.answer'" in duckdb_sql and "[1]" not in duckdb_sql
