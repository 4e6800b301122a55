"""`quail query --database f.duckdb` runs CREATE TABLE ... AS and INSERT INTO ... SELECT with AI
calls: the query is planned like any other, its rows land in one transaction, and a statement
that fails (in the query or in the landing) leaves the file as it was."""

from __future__ import annotations

import duckdb
import pytest

from quail_engine.cli import main

pytestmark = pytest.mark.model


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE reviews AS SELECT * FROM (VALUES (1, 'Great lamp, works well.'), "
                "(2, 'Broken on arrival, awful.')) AS t(id, review)")
    con.execute("CREATE TABLE kept AS SELECT 0 AS id")
    con.close()
    return path


def _run(sql: str, database) -> int:
    return main(["query", "-e", sql, "--dialect", "snowflake", "--database", str(database),
                 "--quiet", "--no-cache", "--precision", "fp32"])


def _rows(database, sql: str) -> list[tuple]:
    con = duckdb.connect(str(database), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_create_table_as_lands_the_query_rows(database, capsys):
    sql = ("CREATE TABLE labeled AS SELECT id, AI_CLASSIFY(review, ['positive', 'negative'])"
           ":labels[0]::string AS label FROM reviews")
    assert _run(sql, database) == 0
    assert "2 rows created labeled" in capsys.readouterr().err
    rows = _rows(database, "SELECT id, label FROM labeled ORDER BY id")
    assert [r[0] for r in rows] == [1, 2]
    assert all(r[1] in ("positive", "negative") for r in rows)


def test_insert_appends_and_a_failed_write_changes_nothing(database, capsys):
    keep = "INSERT INTO kept SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Is {0} positive?', review))"
    assert _run(keep, database) == 0
    after = _rows(database, "SELECT id FROM kept ORDER BY id")
    assert after[0] == (0,) and set(after[1:]) <= {(1,), (2,)}
    # a landing that fails (a text into an integer column) and a query that fails
    assert _run("INSERT INTO kept SELECT AI_COMPLETE('m', review) FROM reviews", database) == 2
    assert "the database is unchanged" in capsys.readouterr().err
    assert _run("INSERT INTO kept SELECT nope FROM reviews WHERE AI_FILTER(review)",
                database) == 2
    assert _rows(database, "SELECT id FROM kept ORDER BY id") == after


def test_create_of_an_existing_table_is_refused_and_keeps_it(database, capsys):
    assert _run("CREATE TABLE kept AS SELECT id FROM reviews WHERE AI_FILTER(review)",
                database) == 2
    assert "already exists" in capsys.readouterr().err
    assert _rows(database, "SELECT * FROM kept") == [(0,)]


def test_unaliased_ai_columns_are_named_as_written(database):
    """An AI call without an alias names its column after the expression in the query's own
    dialect (as the vendors do), not after the placeholder it was lowered to, so later SQL can
    read the saved table by that name."""
    sql = "CREATE TABLE named AS SELECT id, AI_FILTER(review), upper(review) FROM reviews"
    assert _run(sql, database) == 0
    columns = [r[0] for r in _rows(database, "DESCRIBE named")]
    assert columns == ["id", "AI_FILTER(review)", "upper(review)"]
    assert len(_rows(database, 'SELECT "AI_FILTER(review)" FROM named')) == 2
