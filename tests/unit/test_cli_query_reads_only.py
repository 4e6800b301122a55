"""`quail query` reads: statements other than queries are refused before anything runs, and
the query's SQL reads only the files given with --table / --database (no COPY, no other file,
no extension install, no SET undoing it). No model is loaded for any of these."""

from __future__ import annotations

import pytest

from quail_engine.cli import main


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_text("id,review\n1,great\n2,awful\n")
    return path


def _query(sql: str, *tables: str) -> list[str]:
    return ["query", "-e", sql, "--dialect", "duckdb", "--no-cache", "--quiet",
            *(a for t in tables for a in ("--table", t))]


@pytest.mark.parametrize("sql", ["CREATE TABLE t AS SELECT 1",
                                 "INSERT INTO reviews SELECT 3, 'new'"])
def test_a_write_needs_a_database_to_write_to(sql, data, capsys):
    assert main(_query(sql, f"reviews={data}")) == 2
    err = capsys.readouterr().err
    assert "--database" in err and sql in err


@pytest.mark.parametrize(("sql", "kind"), [
    ("COPY (SELECT 42) TO '{out}'", "COPY"),
    ("INSTALL httpfs", "INSTALL"),
    ("SET enable_external_access = true", "SET"),
    ("ATTACH '{out}' AS other", "ATTACH"),
])
def test_statements_other_than_queries_are_refused(sql, kind, data, tmp_path, capsys):
    out = tmp_path / "written"
    assert main(_query(sql.format(out=out), f"reviews={data}")) == 2
    err = capsys.readouterr().err
    assert f"not {kind} statements" in err and sql.split()[0] in err
    assert not out.exists()


def test_a_query_reads_only_the_files_it_was_given(data, tmp_path, capsys):
    secret = tmp_path / "secret.csv"
    secret.write_text("token\nabc\n")
    assert main(_query(f"SELECT * FROM read_csv('{secret}')", f"reviews={data}")) == 2
    err = capsys.readouterr().err
    assert "reads only the files given with --table" in err and str(secret) in err
    assert "abc" not in err


def test_the_given_files_tables_and_patterns_are_read(data, tmp_path, capsys):
    other = tmp_path / "more" / "b.csv"
    other.parent.mkdir()
    other.write_text("id,review\n3,fine\n")
    (tmp_path / "more" / "c.csv").write_text("id,review\n4,bad\n")
    assert main(_query("SELECT count(*) AS n FROM reviews, extra", f"reviews={data}",
                       f"extra=glob:{tmp_path / 'more' / '*.csv'}") + ["--format", "csv"]) == 0
    assert capsys.readouterr().out.split()[-1] == "4"
