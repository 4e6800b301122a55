"""SQL written for another warehouse, run with the wrong --dialect (or the default, duckdb), gets
told which dialect reads it, instead of DuckDB's words about its own `if` macro."""

import pytest

from quail_engine.cli import main
from quail_engine.sql.dialect_guess import dialect_hint, guess_dialects

BQ_IF = "SELECT id, AI.IF(('Is ', review, ' good?')) AS good FROM reviews"
SF_CLASSIFY = ("SELECT id, AI_CLASSIFY(review, ['a', 'b']):labels[0]::string AS label "
               "FROM reviews")
DBX_QUERY = "SELECT ai_query('my-endpoint', review) AS answer FROM reviews"
DUCK_FILTER = "SELECT id FROM reviews WHERE ai_filter('Is {0} good?', review)"


@pytest.mark.parametrize(("sql", "chosen", "expected"), [
    (BQ_IF, "duckdb", ("bigquery",)),
    (BQ_IF, "snowflake", ("bigquery",)),
    (BQ_IF, "bigquery", ()),
    (SF_CLASSIFY, "duckdb", ("snowflake", "databricks")),
    (SF_CLASSIFY, "bigquery", ("snowflake", "databricks")),
    (SF_CLASSIFY, "snowflake", ()),
    (DBX_QUERY, "duckdb", ("databricks",)),
    (DBX_QUERY, "snowflake", ("databricks",)),
    (DUCK_FILTER, "duckdb", ()),
    ("SELECT if(a, 1, 2) FROM t", "duckdb", ()),
    ("SELEC nonsense", "duckdb", ()),
])
def test_guess_names_the_dialects_that_read_more_ai_functions(sql, chosen, expected):
    assert guess_dialects(sql, chosen) == expected


def test_hint_wording():
    assert dialect_hint(BQ_IF, "duckdb") == "this looks like BigQuery SQL: add --dialect bigquery"
    assert dialect_hint(SF_CLASSIFY, "duckdb") == (
        "this looks like Snowflake or Databricks SQL: add --dialect snowflake (or databricks)")
    assert dialect_hint(BQ_IF, "duckdb", "set quail_dialect='{name}'").endswith(
        "set quail_dialect='bigquery'")


def test_bigquery_sql_with_the_default_dialect_says_add_dialect_bigquery(tmp_path, capsys):
    (tmp_path / "r.csv").write_text("id,review\n1,good\n")
    code = main(["query", "-e", BQ_IF, "-q", "--table", f"reviews={tmp_path / 'r.csv'}"])
    assert code == 2
    err = capsys.readouterr().err
    assert "this looks like BigQuery SQL: add --dialect bigquery" in err
    assert f"in: {BQ_IF}" in err


def test_a_parse_failure_in_the_chosen_dialect_gets_the_hint_too(capsys):
    assert main(["query", "-e", DBX_QUERY, "--dialect", "snowflake", "-q"]) == 2
    assert "this looks like Databricks SQL: add --dialect databricks" in capsys.readouterr().err


def test_explain_notes_ai_functions_it_did_not_read(capsys):
    assert main(["explain", "-e", BQ_IF]) == 0
    captured = capsys.readouterr()
    assert "this looks like BigQuery SQL: add --dialect bigquery" in captured.err
    assert main(["explain", "-e", BQ_IF, "--dialect", "bigquery"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["query", "explain"])
def test_dialect_help_names_the_default(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "snowflake | bigquery | databricks | duckdb (default: duckdb)" in help_text


def test_transpile_with_the_wrong_read_dialect_says_which_one(capsys):
    assert main(["transpile", "-e", DBX_QUERY, "--read", "snowflake", "--write", "duckdb"]) == 2
    assert "this looks like Databricks SQL: use --read databricks" in capsys.readouterr().err
    assert main(["transpile", "-e", BQ_IF, "--read", "snowflake", "--write", "databricks"]) == 0
    assert "this looks like BigQuery SQL: use --read bigquery" in capsys.readouterr().err


@pytest.mark.parametrize(("sql", "dialect", "message"), [
    ("SELECT AI_CLASSIFY(review, [" + ", ".join(f"'l{i}'" for i in range(501)) + "]) FROM r",
     "snowflake", "labels"),
    ("SELECT ai_classify(review, ARRAY(" + ", ".join(f"'l{i}'" for i in range(21)) + ")) FROM r",
     "databricks", "labels"),
    ("SELECT AI_CLASSIFY(review, ['a', 'b'], TRUE) FROM r", "snowflake", "AI_CLASSIFY"),
])
def test_an_argument_error_of_the_chosen_dialects_own_function_gets_no_dialect_hint(
        sql, dialect, message, capsys):
    """Another dialect that happens to accept the arguments is no reason to name it."""
    assert main(["explain", "-e", sql, "--dialect", dialect]) == 2
    err = capsys.readouterr().err
    assert "looks like" not in err and message in err
