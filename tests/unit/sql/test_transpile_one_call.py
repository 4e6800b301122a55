"""A vendor shape rebuilt around a warehouse's AI function names the function once: the
NULL-keeping shapes (`CASE WHEN v IS NOT NULL THEN ... v ... END`) wrote the call two or three
times, each a model call the warehouse runs and bills per row."""

import pytest

from quail_engine.sql.transpiler import transpile

CASES = [  # read, write, sql, the target's call, the one-call form it sits in
    ("snowflake", "databricks", "SELECT AI_CLASSIFY(body, ['a', 'b']) AS c FROM t",
     "ai_classify(body, ARRAY('a', 'b'))", "TRANSFORM(ARRAY(ai_classify"),
    ("snowflake", "databricks",
     "SELECT AI_CLASSIFY(body, ['a', 'b'], {'output_mode': 'multi'}) AS c FROM t",
     "ai_classify(body, '[\"a\", \"b\"]', map('multilabel', 'true'))", "quail_v -> CASE"),
    ("snowflake", "databricks", "SELECT AI_SENTIMENT(body) AS c FROM t",
     "ai_analyze_sentiment(body)", ")[0] AS c"),
    ("snowflake", "databricks", "SELECT SNOWFLAKE.CORTEX.CLASSIFY_TEXT(body, ['a', 'b']) AS c "
     "FROM t", "ai_classify(body, ARRAY('a', 'b'))", "TRANSFORM(ARRAY(ai_classify"),
    ("snowflake", "databricks", "SELECT AI_EXTRACT(body, {'name': 'who?'}) AS c FROM t",
     "ai_extract(body, '[\"name\"]')", "TRANSFORM(ARRAY(ai_extract"),
    ("snowflake", "databricks", "SELECT SNOWFLAKE.CORTEX.EXTRACT_ANSWER(body, 'who?') AS c FROM t",
     "ai_extract(body, '[\"answer\"]')", "TRANSFORM(ARRAY(ai_extract"),
    ("bigquery", "databricks", "SELECT AI.CLASSIFY(body, ['a', 'b'], output_mode => 'single') AS c "
     "FROM t", "ai_classify(body, ARRAY('a', 'b'))", "THEN ARRAY(quail_v) END)[0]"),
    ("bigquery", "databricks", "SELECT AI.GENERATE(body) AS c FROM t", "ai_gen(body)",
     "quail_v AS result"),
    ("snowflake", "bigquery", "SELECT AI_CLASSIFY(body, ['a', 'b']) AS c FROM t",
     "AI.CLASSIFY(body, categories => ['a', 'b'])", "FROM UNNEST([AI.CLASSIFY"),
    ("snowflake", "bigquery", "SELECT AI_SENTIMENT(body) AS c FROM t", "AI.CLASSIFY(body",
     "AS quail_v) AS c"),
    ("snowflake", "bigquery", "SELECT AI_EXTRACT(body, {'name': 'who?'}) AS c FROM t",
     "AI.GENERATE(body, output_schema => 'name STRING')", "FROM UNNEST([(SELECT IF(quail_v.status"),
    ("databricks", "bigquery", "SELECT ai_classify(body, '[\"a\", \"b\"]') AS c FROM t",
     "AI.CLASSIFY(body, categories => ['a', 'b'])", "'response', JSON_ARRAY(quail_v)"),
    ("databricks", "bigquery", "SELECT ai_extract(body, '[\"name\"]') AS c FROM t",
     "AI.GENERATE(body, output_schema => 'name STRING')", "'error_message', CASE WHEN quail_v"),
    ("bigquery", "duckdb", "SELECT AI.GENERATE(body, output_schema => 'name STRING, city STRING') "
     "AS c FROM t", "ai_extract(body, ['name', 'city'], output_schema := 'name STRING, city "
     "STRING')", "LIST_TRANSFORM([ai_extract"),
    ("bigquery", "duckdb", "SELECT AI.GENERATE_BOOL(body) AS c FROM t", "ai_filter(body)",
     "LAMBDA quail_v : {'result': quail_v"),
    ("bigquery", "duckdb", "SELECT AI.CLASSIFY(body, ['a', 'b'], output_mode => 'single') AS c "
     "FROM t", "ai_classify(body, ['a', 'b'])", "THEN [quail_v] END)[1] AS c"),
    ("snowflake", "duckdb", "SELECT AI_CLASSIFY(body, ['a', 'b']) AS c FROM t",
     "ai_classify(body, ['a', 'b'])", "LIST_TRANSFORM([ai_classify"),
    ("snowflake", "duckdb", "SELECT AI_SENTIMENT(body) AS c FROM t", "ai_classify(body",
     "'sentiment', quail_v)"),
    ("snowflake", "duckdb", "SELECT AI_EXTRACT(body, {'name': 'who?'}) AS c FROM t",
     "ai_extract(body, {'name': 'who?'})", "JSON_OBJECT('response', quail_v"),
    ("databricks", "duckdb", "SELECT ai_extract(body, '[\"name\"]') AS c FROM t",
     "ai_extract(body, ['name'])", "'error_message', CASE WHEN quail_v"),
    ("databricks", "duckdb", "SELECT ai_query('ep', body, failOnError => false) AS c FROM t",
     "ai_generate(body, model := 'ep', on_error := 'details')", "'errorMessage': CASE WHEN quail_v"),
]


@pytest.mark.parametrize("read,write,sql,call,form", CASES,
                         ids=[f"{r}->{w}:{s[7:50]}" for r, w, s, _, _ in CASES])
def test_a_rebuilt_shape_calls_the_function_once(read, write, sql, call, form):
    out = transpile(sql, read, write)
    assert out.count(call) == 1, out
    assert form in out, out


@pytest.mark.parametrize("sql,read,write,count", [
    # the statement itself names the call twice: two calls, as written
    ("SELECT AI_CLASSIFY(body, ['a', 'b']):labels[0]::string AS c, "
     "AI_CLASSIFY(body, ['a', 'b']):labels[0]::string || body AS d FROM t", "snowflake",
     "bigquery", 2),
    ("SELECT AI_CLASSIFY(body, ['a', 'b']):labels[0]::string AS c, "
     "AI_CLASSIFY(body, ['a', 'b']):labels[0]::string || body AS d FROM t", "snowflake",
     "duckdb", 2),
    # one mention: nothing to bind
    ("SELECT AI_CLASSIFY(body, ['a', 'b']):labels[0]::string AS c FROM t", "snowflake",
     "bigquery", 1),
])
def test_calls_the_statement_names_are_kept(sql, read, write, count):
    out = transpile(sql, read, write)
    assert "quail_v" not in out and out.lower().count("classify(body") == count, out


@pytest.mark.parametrize("write", ["bigquery", "databricks", "duckdb", "snowflake"])
def test_a_call_read_whole_and_through_a_path_transpiles(write):
    """The same call named whole and through `:labels[0]`: two operators in the source (their
    shapes differ), one call in a target that writes both mentions alike. It was refused,
    'reads back as ai_classify, not ai_classify, ai_classify'."""
    sql = ("SELECT AI_CLASSIFY(body, ['a', 'b']) AS c, "
           "AI_CLASSIFY(body, ['a', 'b']):labels[0]::string AS d FROM t")
    out = transpile(sql, "snowflake", write)
    assert out.lower().count("classify(body") == 2, out
    assert " AS c" in out and " AS d" in out, out


def test_the_read_back_still_tells_two_questions_from_one():
    """Counting one call per distinct question must not merge two questions of one kind:
    classifying into other labels is another call, and a target that lost it is refused."""
    from quail_engine.sql.query import lower_sql
    from quail_engine.sql.transpiler import _same_kinds

    def ops(sql):
        return lower_sql(sql, "snowflake", runnable=False)[1]

    two = ops("SELECT AI_CLASSIFY(body, ['a', 'b']) AS c, "
              "AI_CLASSIFY(body, ['x', 'y']):labels[0]::string AS d FROM t")
    one = ops("SELECT AI_CLASSIFY(body, ['a', 'b']) AS c FROM t")
    same_twice = ops("SELECT AI_CLASSIFY(body, ['a', 'b']) AS c, "
                     "AI_CLASSIFY(body, ['a', 'b']):labels[0]::string AS d FROM t")
    assert len(two) == 2 and len(same_twice) == 2
    assert not _same_kinds(two, one)
    assert _same_kinds(same_twice, one)
