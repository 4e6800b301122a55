"""`quail query --database f.duckdb` lands a CREATE TABLE ... AS / INSERT INTO ... SELECT with
the types its SELECT returns: a JSON result (an AI call's object, PARSE_JSON, a STRUCT holding
JSON) is a JSON column, not the VARCHAR Arrow carried it in."""

from __future__ import annotations

import json

import duckdb
import pytest

from quail_engine.cli import main


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE reviews AS SELECT * FROM (VALUES (1, 'Alice paid 45 dollars in "
                "Paris.'), (2, 'Bob wants a refund.')) AS t(id, review)")
    con.close()
    return path


def _run(sql: str, database, dialect: str = "snowflake") -> int:
    return main(["query", "-e", sql, "--dialect", dialect, "--database", str(database),
                 "--quiet", "--no-cache", "--precision", "fp32"])


def _types(database, table: str) -> dict[str, str]:
    con = duckdb.connect(str(database), read_only=True)
    try:
        return {name: kind for name, kind, *_ in con.execute(f"DESCRIBE {table}").fetchall()}
    finally:
        con.close()


def _rows(database, sql: str) -> list[tuple]:
    con = duckdb.connect(str(database), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_json_without_ai_lands_as_json(database):
    assert _run("CREATE TABLE x AS SELECT id, PARSE_JSON('{\"k\": [1, 2]}') AS j, review "
                "FROM reviews", database) == 0
    assert _types(database, "x") == {"id": "INTEGER", "j": "JSON", "review": "VARCHAR"}
    assert _rows(database, "SELECT id, j -> '$.k[1]' FROM x ORDER BY id") == [(1, "2"), (2, "2")]


def test_insert_into_a_new_json_column_keeps_it_json(database):
    assert _run("CREATE TABLE x AS SELECT id, PARSE_JSON('[1]') AS j FROM reviews", database) == 0
    assert _run("INSERT INTO x SELECT 3, PARSE_JSON('[3]')", database) == 0
    assert _types(database, "x")["j"] == "JSON"
    assert [json.loads(j) for (j,) in _rows(database, "SELECT j FROM x ORDER BY id")] == [
        [1], [1], [3]]


@pytest.mark.model
def test_ai_json_results_land_as_json(database):
    """AI_EXTRACT and AI_CLASSIFY objects as JSON, AI.GENERATE's STRUCT with its JSON field."""
    assert _run("CREATE TABLE x AS SELECT id, AI_EXTRACT(review, {'name': 'Who?'}) AS e, "
                "AI_CLASSIFY(review, ['a', 'b']) AS c FROM reviews", database) == 0
    assert _types(database, "x") == {"id": "INTEGER", "e": "JSON", "c": "JSON"}
    for e, c in _rows(database, "SELECT e -> '$.response', c -> '$.labels[0]' FROM x"):
        assert set(json.loads(e)) == {"name"} and json.loads(c) in ("a", "b")
    assert _run("CREATE TABLE g AS SELECT id, AI.GENERATE(('Summarize: ', review), model_params "
                "=> JSON '{\"generation_config\": {\"max_output_tokens\": 3}}') AS g FROM reviews",
                database, "bigquery") == 0
    assert _types(database, "g")["g"] == ("STRUCT(result VARCHAR, full_response JSON, "
                                          "status VARCHAR)")
