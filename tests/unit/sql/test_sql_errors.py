"""Every front-end error class: the type, the function it names, and the quoted fragment."""

import pytest

from quail_engine.errors import SqlError, UnsupportedError
from quail_engine.sql import parse
from quail_engine.sql.errors import (
    ArgumentError,
    LabelsNotLiteralError,
    PlaceholderError,
    UnknownAiFunctionError,
    UnsupportedPositionError,
)

CASES = [
    # (dialect, sql, error class, words the message must contain, fragment it must quote)
    ("snowflake", "SELECT AI_FOO(review) FROM t", UnknownAiFunctionError, "AI_FOO",
     "AI_FOO(review)"),
    ("snowflake", "SELECT SNOWFLAKE.CORTEX.FOO(review) FROM t", UnknownAiFunctionError,
     "SNOWFLAKE.CORTEX.FOO", "SNOWFLAKE.CORTEX.FOO(review)"),
    ("bigquery", "SELECT AI.FROB(review) FROM t", UnknownAiFunctionError, "AI.FROB",
     "AI.FROB(review)"),
    ("databricks", "SELECT ai_frob(review) FROM t", UnknownAiFunctionError, "AI_FROB",
     "ai_frob(review)"),
    ("duckdb", "SELECT ai_frob(review) FROM t", UnknownAiFunctionError, "AI_FROB",
     "ai_frob(review)"),
    ("snowflake", "SELECT AI_CLASSIFY(review) FROM t", ArgumentError, "missing list_of_categories",
     "AI_CLASSIFY(review)"),
    ("snowflake", "SELECT AI_FILTER(a, b, TRUE, d) FROM t", ArgumentError, "at most 3",
     "AI_FILTER(a, b, TRUE, d)"),
    ("bigquery", "SELECT AI.IF(review, colour => 'red') FROM t", ArgumentError, "'colour'",
     "AI.IF(review, colour => 'red')"),
    ("bigquery", "SELECT * FROM t WHERE AI.IF('Is it good?', review)", ArgumentError,
     "AI.IF takes at most 1 positional", "AI.IF('Is it good?', review)"),
    ("databricks", "SELECT ai_translate(review) FROM t", ArgumentError, "missing to_lang",
     "ai_translate(review)"),
    ("duckdb", "SELECT ai_classify(review) FROM t", ArgumentError, "2 positional",
     "ai_classify(review)"),
    ("snowflake", "SELECT AI_AGG(review) FROM t", ArgumentError, "missing instruction",
     "AI_AGG(review)"),
    # DISTINCT only where the vendor documents it (BigQuery AI.AGG, DuckDB ai_aggregate): it
    # was dropped without a word
    ("snowflake", "SELECT AI_AGG(DISTINCT review, 'Summarize') FROM t", ArgumentError,
     "AI_AGG takes no DISTINCT: aggregate the rows of a SELECT DISTINCT",
     "AI_AGG(DISTINCT review, 'Summarize')"),
    ("databricks", "SELECT ai_classify(DISTINCT review, ARRAY('a', 'b')) FROM t", ArgumentError,
     "AI_CLASSIFY takes no DISTINCT", "ai_classify(DISTINCT review, ARRAY('a', 'b'))"),
    ("snowflake", "SELECT AI_EXTRACT(text => review) FROM t", ArgumentError, "responseFormat",
     "AI_EXTRACT(text => review)"),
    ("snowflake", "SELECT AI_FILTER(PROMPT(tmpl, review)) FROM t", ArgumentError,
     "template must be a string literal", "PROMPT(tmpl, review)"),
    ("snowflake", "SELECT AI_CLASSIFY(review, ['only']) FROM t", ArgumentError,
     "at least 2 labels", "['only']"),
    ("snowflake", "SELECT AI_FILTER(PROMPT('{0} and {1}', a)) FROM t", PlaceholderError,
     "{1} has no argument", "PROMPT('{0} and {1}', a)"),
    ("duckdb", "SELECT ai_filter('Is {2} good?', a, b) FROM t", PlaceholderError,
     "{2} has no argument", "ai_filter('Is {2} good?', a, b)"),
    ("snowflake", "SELECT AI_CLASSIFY(review, label_column) FROM t", LabelsNotLiteralError,
     "labels must be a literal", "label_column"),
    ("bigquery", "SELECT AI.CLASSIFY(review, categories => cats) FROM t", LabelsNotLiteralError,
     "labels must be a literal", "cats"),
    ("databricks", "SELECT ai_classify(review, ARRAY(a, 'b')) FROM t", LabelsNotLiteralError,
     "labels must be a literal", "ARRAY(a, 'b')"),
    ("snowflake", "SELECT AI_AGG(review, instruction_col) FROM t", LabelsNotLiteralError,
     "instruction must be a literal", "instruction_col"),
    ("snowflake", "SELECT AI_COMPLETE(model_col, review) FROM t", LabelsNotLiteralError,
     "model must be a literal", "model_col"),
    ("snowflake", "SELECT AI_FILTER(AI_COMPLETE('m', review)) FROM t", UnsupportedPositionError,
     "another AI function", "AI_FILTER(AI_COMPLETE('m', review))"),
    ("snowflake", "SELECT id FROM t WHERE AI_AGG(review, 'x') = 'y'", UnsupportedPositionError,
     "aggregate", "AI_AGG(review, 'x')"),
    ("bigquery", "SELECT id FROM t GROUP BY id, AI.AGG(review, 'x')", UnsupportedPositionError,
     "GROUP BY", "AI.AGG(review, 'x')"),
    ("snowflake", "SELECT PROMPT('Hi {0}', review) FROM t", UnsupportedPositionError,
     "PROMPT()", "PROMPT('Hi {0}', review)"),
    ("duckdb", "SELECT * FROM t LIMIT ai_count_tokens(review)", UnsupportedPositionError,
     "LIMIT", "ai_count_tokens(review)"),
    ("snowflake", "SELECT AI_SENTIMENT(review, ['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'a8', 'a9', 'a10']) FROM t", ArgumentError,
     "at most 10 names", "AI_SENTIMENT(review, ['a0'"),
    ("snowflake", "SELECT AI_COMPLETE('m', [{'role': 'user', 'content': x}]) FROM t",
     ArgumentError, "SNOWFLAKE.CORTEX.COMPLETE's form", "AI_COMPLETE('m', ["),
    ("databricks", "SELECT ai_parse_document(content) FROM t", UnsupportedError,
     "ai_parse_document", "ai_parse_document(content)"),
    ("snowflake", "SELECT FROM WHERE", SqlError, "cannot parse", "SELECT FROM WHERE"),
    ("duckdb", "SELECT 1; SELECT 2", SqlError, "one SQL statement", "SELECT 1; SELECT 2"),
]


@pytest.mark.parametrize(("dialect", "sql", "error", "words", "fragment"), CASES,
                         ids=[f"{c[2].__name__}-{i}" for i, c in enumerate(CASES)])
def test_error(dialect, sql, error, words, fragment):
    with pytest.raises(error) as info:
        parse(sql, dialect)
    assert isinstance(info.value, SqlError)
    message = str(info.value)
    assert words in message
    assert fragment in message
    assert info.value.dialect == dialect


def test_unknown_dialect_names_the_choices():
    with pytest.raises(SqlError, match="unknown dialect 'oracle'.*snowflake, bigquery"):
        parse("SELECT 1", "oracle")


def test_cli_exit_code_for_sql_errors(capsys):
    from quail_engine.cli import main

    assert main(["explain", "-e", "SELECT AI_FOO(x) FROM t", "--dialect", "snowflake"]) == 2
    assert "unknown AI function AI_FOO" in capsys.readouterr().err
