"""Forms quail reads but cannot run are refused when the query is read to run (explain, query,
dbt): an UnsupportedError naming the function and the reason and quoting the SQL, never a
DuckDB error later. Transpile still reads them."""

import pytest

from quail_engine.errors import UnsupportedError
from quail_engine.sql import parse, transpile

CASES = [
    # (dialect, sql, function named, reason words, fragment quoted)
    ("snowflake", "SELECT id FROM t WHERE AI_FILTER('Is there a cat?', TO_FILE('@st', p))",
     "AI_FILTER", "file argument", "AI_FILTER('Is there a cat?', TO_FILE('@st', p))"),
    ("snowflake", "SELECT id FROM t WHERE AI_FILTER('Is there a cat?', img)",
     "AI_FILTER", "file argument (img)", "AI_FILTER('Is there a cat?', img)"),
    ("snowflake", "SELECT AI_FILTER(PROMPT('Is {0} a cat?', FL_GET_FILE(p))) FROM t",
     "AI_FILTER", "FL_GET_FILE(p)", "AI_FILTER(PROMPT('Is {0} a cat?', FL_GET_FILE(p)))"),
    ("snowflake", "SELECT AI_COMPLETE('claude-3-5-sonnet', 'Describe it', TO_FILE('@s', p)) FROM t",
     "AI_COMPLETE", "not images or files", "AI_COMPLETE('claude-3-5-sonnet', 'Describe it'"),
    ("snowflake", "SELECT AI_COMPLETE('m', 'Describe it', img) FROM t",
     "AI_COMPLETE", "file argument (img)", "AI_COMPLETE('m', 'Describe it', img)"),
    ("snowflake", "SELECT AI_CLASSIFY(TO_FILE('@s', p), ['cat', 'dog']):labels[0]::STRING FROM t",
     "AI_CLASSIFY", "TO_FILE('@s', p)", "AI_CLASSIFY(TO_FILE('@s', p), ['cat', 'dog'])"),
    ("snowflake", "SELECT AI_EXTRACT(file => f, responseFormat => ['name']) FROM t",
     "AI_EXTRACT", "file argument (f)", "AI_EXTRACT(file => f"),
    ("snowflake", "SELECT AI_EMBED('e5-base-v2', body) FROM t",
     "AI_EMBED", "no embedding model", "AI_EMBED('e5-base-v2', body)"),
    ("snowflake", "SELECT SNOWFLAKE.CORTEX.EMBED_TEXT_768('e5-base-v2', body) FROM t",
     "SNOWFLAKE.CORTEX.EMBED_TEXT_768", "no embedding model", "EMBED_TEXT_768('e5-base-v2', body)"),
    ("bigquery", "SELECT AI.EMBED(body).result FROM t",
     "AI.EMBED", "no embedding model", "AI.EMBED(body).result"),
    ("duckdb", "SELECT ai_embed(body) FROM t", "AI_EMBED", "no embedding model", "ai_embed(body)"),
    ("bigquery", "SELECT * FROM AI.FORECAST(TABLE t, data_col => 'y', timestamp_col => 'ts')",
     "AI.FORECAST", "time-series model", "AI.FORECAST(TABLE t, data_col => 'y'"),
    ("bigquery", "SELECT * FROM ML.FORECAST(MODEL m, STRUCT(3 AS horizon))",
     "ML.FORECAST", "time-series model", "ML.FORECAST(MODEL m"),
    ("bigquery", "SELECT * FROM ML.GENERATE_EMBEDDING(MODEL m, TABLE t)",
     "ML.GENERATE_EMBEDDING", "no embedding model", "ML.GENERATE_EMBEDDING(MODEL m, TABLE t)"),
    ("bigquery", "SELECT * FROM AI.GENERATE_EMBEDDING(MODEL m, TABLE t)",
     "AI.GENERATE_EMBEDDING", "no embedding model", "AI.GENERATE_EMBEDDING(MODEL m, TABLE t)"),
    ("bigquery", "SELECT * FROM VECTOR_SEARCH(TABLE t, 'e', (SELECT [1.0] AS e), top_k => 2)",
     "VECTOR_SEARCH", "vector index", "VECTOR_SEARCH(TABLE t, 'e'"),
    ("databricks", "SELECT * FROM vector_search(index => 'i', query_text => 'x', num_results => 2)",
     "VECTOR_SEARCH", "vector index", "index => 'i'"),
]


@pytest.mark.parametrize(("dialect", "sql", "function", "why", "fragment"), CASES,
                         ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_refused_when_read_to_run(dialect, sql, function, why, fragment):
    with pytest.raises(UnsupportedError) as info:
        parse(sql, dialect)
    message = str(info.value)
    assert message.startswith(f"{function} "), message
    assert "is not supported" in message and why in message, message
    assert f"[{dialect}] in: " in message and fragment in message, message


def test_transpile_still_reads_an_embedding_call():
    out = transpile("SELECT AI_EMBED('e5-base-v2', body) FROM t", "snowflake", "bigquery")
    assert out.startswith("SELECT AI.EMBED(body"), out


def test_text_arguments_of_the_same_functions_still_run():
    parsed = parse("SELECT AI_COMPLETE('m', 'Describe it', {'max_tokens': 20}) FROM t",
                   "snowflake")
    assert [op.op for op in parsed.ai_ops] == ["ai_generate"]
