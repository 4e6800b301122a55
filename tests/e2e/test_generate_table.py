"""BigQuery's AI.GENERATE_TABLE on the embedded models: its input's columns, the output_schema's
columns in their types (as AI.GENERATE's STRUCT under the same schema), full_response JSON and a
status that is '' for an answered row and says why otherwise. Before, ARRAY/STRUCT fields were
JSON strings and status was '' on every row, NULL answers included."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pytest

from quail_engine.exec.facade import SessionConfig, open_session

pytestmark = pytest.mark.model

NO_ANSWER = "no answer: a NULL input"


@pytest.fixture(scope="module")
def session(require_embedded):
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    con = duckdb.connect()
    con.execute("CREATE TABLE docs AS SELECT * FROM (VALUES (1, 'Alice Smith, 34, paid 45 "
                "dollars in Paris.'), (2, 'Bob wants a refund.'), (3, NULL)) AS t(id, prompt)")
    return open_session(con, SessionConfig(use_cache=False, precision="fp32"))


def _table(session, schema: str, extra: str = ""):
    return session.execute(f"SELECT * FROM AI.GENERATE_TABLE(MODEL `p.d.m`, TABLE docs, "
                           f"STRUCT('{schema}' AS output_schema{extra})) ORDER BY id",
                           "bigquery")


def test_the_schemas_columns_have_its_types(session):
    table = _table(session, "name STRING, age INT64, tags ARRAY<STRING>, p STRUCT<city STRING>")
    assert table.column_names == ["id", "prompt", "name", "age", "tags", "p", "full_response",
                                  "status"]
    types = {f.name: f.type for f in table.schema}
    assert types["name"] == pa.string() and types["age"] == pa.int64()
    assert types["tags"] == pa.list_(pa.string())
    assert types["p"] == pa.struct([("city", pa.string())])
    assert types["status"] == pa.string()


def test_status_is_empty_for_an_answer_and_says_why_otherwise(session):
    rows = _table(session, "name STRING, age INT64").to_pylist()
    for row in rows[:2]:  # answered: the fields are full_response's, status ''
        assert row["status"] == "", row
        answer = json.loads(row["full_response"])
        assert row["name"] == answer["name"] and row["age"] == answer["age"]
        assert isinstance(row["name"], str) and isinstance(row["age"], int)
    assert rows[2]["full_response"] is None and rows[2]["status"].startswith(NO_ANSWER)


def test_an_unfinished_answer_is_null_with_its_status(session):
    rows = _table(session, "name STRING", ", 1 AS max_output_tokens").to_pylist()
    assert all(r["name"] is None and r["status"].startswith(NO_ANSWER) for r in rows), rows


def test_full_response_is_json(session):
    table = session.execute("SELECT TYPEOF(full_response) AS t FROM AI.GENERATE_TABLE(MODEL "
                            "`p.d.m`, TABLE docs, STRUCT('name STRING' AS output_schema))",
                            "bigquery")
    assert set(table.column("t").to_pylist()) == {"JSON"}
