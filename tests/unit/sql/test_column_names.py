"""Unaliased AI projections are aliased with the expression as the user wrote it (sqlglot's
spelling in the query's dialect) when the query runs; transpiled SQL keeps them unaliased."""

import pytest

# (the package's function: importing the submodule by name first would leave the package
# attribute `transpile` bound to the module for the tests collected after this one)
from quail_engine.sql import transpile
from quail_engine.sql.query import parse


@pytest.mark.parametrize("dialect,sql,name", [
    ("snowflake", "SELECT id, AI_FILTER(txt) FROM r", "AI_FILTER(txt)"),
    ("bigquery", "SELECT id, AI.IF(('Is it good? ', txt)) FROM r", "AI.IF(('Is it good? ', txt))"),
    ("databricks", "SELECT id, ai_classify(txt, ARRAY('a', 'b')) FROM r",
     "AI_CLASSIFY(txt, ARRAY('a', 'b'))"),  # (sqlglot writes function names upper case)
    ("snowflake", "SELECT * FROM (SELECT AI_FILTER(txt) FROM r)", "AI_FILTER(txt)"),
])
def test_an_unaliased_ai_column_gets_its_own_text_as_name(dialect, sql, name):
    duckdb_sql = parse(sql, dialect).duckdb_sql
    assert f'AS "{name}"' in duckdb_sql
    assert "quail_ai_" in duckdb_sql  # (the call itself is still the placeholder)


def test_aliased_columns_and_plain_expressions_keep_their_names():
    duckdb_sql = parse("SELECT AI_FILTER(txt) AS ok, upper(txt), txt FROM r", "snowflake").duckdb_sql
    assert 'AS "' not in duckdb_sql and " AS ok" in duckdb_sql


def test_transpile_adds_no_alias():
    out = transpile("SELECT id, AI_FILTER(txt) FROM r", "snowflake", "bigquery")
    assert out == "SELECT id, AI.IF(txt) FROM r"
