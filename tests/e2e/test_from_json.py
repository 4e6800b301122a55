"""Databricks' from_json with a Spark schema string, run through a real session on DuckDB: the
value in the schema's type, Databricks' 0-based subscript, NULL for what does not parse. It
failed with "Malformed JSON ... Input: "array<string>"" (DuckDB's from_json reads its second
argument as a JSON structure)."""

from __future__ import annotations

import datetime
import decimal

import duckdb
import pyarrow as pa
import pytest

from quail_engine.exec.facade import SessionConfig, open_session
from quail_engine.sql.errors import SqlError

ROWS = [(1, '["a", "b"]', '[1, 2]', '{"a": "x", "n": 3, "extra": true}'),
        (2, "not json", '[1, "q"]', '{"a": "y"}')]


@pytest.fixture(scope="module")
def session():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, s VARCHAR, i VARCHAR, o VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", ROWS)
    return open_session(con, SessionConfig(use_cache=False, precision="fp32"))


CASES = [
    # (expression over t, its Arrow type, the values of rows 1 and 2)
    ("from_json(s, 'array<string>')[0]", pa.string(), ["a", None]),
    ("from_json(s, 'array<string>')[1]", pa.string(), ["b", None]),
    ("from_json(s, 'array<string>')", pa.list_(pa.string()), [["a", "b"], None]),
    ("from_json(i, 'array<int>')", pa.list_(pa.int32()), [[1, 2], [1, None]]),
    ("from_json(i, 'ARRAY<BIGINT>')[1]", pa.int64(), [2, None]),
    ("from_json(o, 'struct<a:string,n:int>')",
     pa.struct([("a", pa.string()), ("n", pa.int32())]),
     [{"a": "x", "n": 3}, {"a": "y", "n": None}]),
    ("from_json(o, 'struct<a: string, n: int>').a", pa.string(), ["x", "y"]),
    ("from_json(o, 'a STRING, n INT').n", pa.int32(), [3, None]),
    ("from_json(o, 'map<string, int>')['n']", pa.int32(), [3, None]),
    ("from_json('[\"2024-05-01\"]', 'array<date>')[0]", pa.date32(),
     [datetime.date(2024, 5, 1)] * 2),
    ("from_json('{\"p\": 1.5}', 'struct<p: decimal(10,2)>').p", pa.decimal128(10, 2),
     [decimal.Decimal("1.50")] * 2),
]


@pytest.mark.parametrize("expr,arrow_type,expected", CASES, ids=[c[0] for c in CASES])
def test_from_json_reads_the_spark_schema(session, expr, arrow_type, expected):
    table = session.execute(f"SELECT id, {expr} AS v FROM t ORDER BY id", "databricks")
    assert table.schema.field("v").type == arrow_type
    assert table.column("v").to_pylist() == expected


def test_an_array_from_json_explodes_into_its_strings(session):
    table = session.execute("SELECT id, explode(from_json(s, 'array<string>')) AS v FROM t "
                            "ORDER BY id, v", "databricks")
    assert table.to_pylist() == [{"id": 1, "v": "a"}, {"id": 1, "v": "b"}]


@pytest.mark.parametrize("schema", ["binary", "array<interval day>", "map<int, string>",
                                    "foo<bar>"])
def test_a_schema_with_no_duckdb_type_is_refused_quoting_it(session, schema):
    with pytest.raises(SqlError, match=f"from_json schema '{schema}'"):
        session.execute(f"SELECT from_json(o, '{schema}') AS v FROM t", "databricks")


def test_from_json_options_are_refused(session):
    with pytest.raises(SqlError, match="from_json options"):
        session.execute("SELECT from_json(o, 'a INT', map('mode', 'FAILFAST')) AS v FROM t",
                        "databricks")


@pytest.mark.model
def test_from_json_over_an_ai_answer(require_embedded):
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    con = duckdb.connect()
    con.execute("CREATE TABLE docs AS SELECT 1 AS id, 'Alice paid 45 dollars in Paris.' AS body")
    session = open_session(con, SessionConfig(use_cache=False, precision="fp32"))
    table = session.execute(
        "SELECT from_json(ai_query('ep', 'Who is in: ' || body, responseFormat => "
        "'STRUCT<person: STRING>'), 'struct<person: string>').person AS v FROM docs",
        "databricks")
    assert table.schema.field("v").type == pa.string()
    value = table.column("v")[0].as_py()
    assert value is None or (isinstance(value, str) and not value.startswith('"'))
