"""Errors from DuckDB name the user's mistake in the user's words: a table they did not pass, the
AI function they wrote (never `quail_ai_<n>_<hex>`), and their own SQL (never the rewritten one),
on one line."""

import duckdb
import pytest

from quail_engine.cli import main
from quail_engine.errors import ExecutionError
from quail_engine.exec.user_errors import quote_sql, scrub, statement_error
from quail_engine.sql.query import parse

SQL = "SELECT id, AI_FILTER(PROMPT('Is {0} good?', review)) AS ok FROM reviews"


def test_missing_table_says_how_to_pass_it(capsys):
    assert main(["query", "-e", SQL, "--dialect", "snowflake", "-q"]) == 2
    err = capsys.readouterr().err
    assert ("table 'reviews' is not defined: pass it with --table reviews=PATH "
            "(or --database FILE.duckdb)") in err
    assert f"in: {SQL}" in err and len(err.strip().splitlines()) == 1
    assert "quail_ai" not in err and "pg_views" not in err and "CAST(" not in err


def test_missing_table_keeps_a_real_suggestion(tmp_path, capsys):
    (tmp_path / "r.csv").write_text("id,review\n1,good\n")
    code = main(["query", "-e", SQL.replace("reviews", "reviewz"), "--dialect", "snowflake",
                 "-q", "--table", f"reviews={tmp_path / 'r.csv'}"])
    assert code == 2
    assert "table 'reviewz' is not defined (did you mean 'reviews'?)" in capsys.readouterr().err


def test_binder_error_quotes_the_users_sql_without_internal_names(tmp_path, capsys):
    (tmp_path / "r.csv").write_text("id,review\n1,good\n")
    bad = "SELECT AI_FILTER(PROMPT('Is {0} good?', revew)) FROM reviews"
    assert main(["query", "-e", bad, "--dialect", "snowflake", "-q",
                 "--table", f"reviews={tmp_path / 'r.csv'}"]) == 2
    err = capsys.readouterr().err
    assert 'Referenced column "revew" not found' in err and f"in: {bad}" in err
    assert "quail_ai" not in err and "LINE 1" not in err


@pytest.mark.parametrize(("text", "expected"), [
    ("No function matches 'quail_ai_0_b40c7d4032(VARCHAR)'",
     "No function matches 'AI_FILTER(VARCHAR)'"),
    ("quail_ai_1_ab12(x) and quail_ai_0(y)", "AI_CLASSIFY(x) and AI_FILTER(y)"),
    ("Scalar Function with name quail_ai_3f9e2a17c0d4b5e6 does not exist",
     "Scalar Function with name <AI function> does not exist"),
    ("quail_ai_7_abc(x)", "<AI function>(x)"),
    ("no internal name here", "no internal name here"),
])
def test_scrub_names_the_function_the_user_wrote(text, expected):
    ops = parse("SELECT AI_FILTER(PROMPT('Good? {0}', r)), AI_CLASSIFY(r, ['a', 'b']) FROM t",
                "snowflake").ai_ops
    assert scrub(text, ops) == expected


def test_bigquery_names_keep_their_dots():
    ops = parse("SELECT AI.IF(('Good? ', r)) FROM t", "bigquery").ai_ops
    assert scrub("error in quail_ai_0_ffff(r)", ops) == "error in AI.IF(r)"


def test_quote_is_one_line_without_dbt_comment_and_at_most_200_chars():
    sql = '/* {"app": "dbt", "node_id": "model.x"} */\nSELECT a,\n  b FROM t WHERE ' + "x" * 400
    quoted = quote_sql(sql)
    assert quoted.startswith("SELECT a, b FROM t WHERE x")
    assert len(quoted) <= 200 and "\n" not in quoted


def test_statement_error_from_real_duckdb_quotes_only_the_source():
    parsed = parse(SQL.replace("reviews", "nowhere"), "snowflake")
    con = duckdb.connect()
    with pytest.raises(duckdb.Error) as info:
        con.execute("EXPLAIN " + parsed.duckdb_sql.replace("quail_ai_0", "quail_ai_0_0123abcd"))
    err = statement_error(info.value, parsed)
    assert isinstance(err, ExecutionError)
    assert str(err) == ("table 'nowhere' is not defined: pass it with --table nowhere=PATH "
                        f"(or --database FILE.duckdb) in: {parsed.source_sql}")
