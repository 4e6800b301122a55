"""Issue 40 item 7 leftovers, as tables: show_details written in every warehouse, few-shot
examples carried where the target takes them (else warned about), AI_SENTIMENT's aspects
carried or refused, BigQuery's enumerated options checked, scores => TRUE refused for running.
Vendor result shapes answer NULL for a NULL input, never a value around a NULL."""

import logging

import duckdb
import pytest
from sqlglot import exp

from quail_engine.errors import UnsupportedError
from quail_engine.sql import parse, shapes, transpile
from quail_engine.sql.errors import ArgumentError

DETAILS = "SELECT AI_COMPLETE('llama3.1-8b', body, show_details => TRUE) AS d FROM t"


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize(("write", "expected"), [
    ("snowflake", "AI_COMPLETE(model => 'llama3.1-8b', prompt => body, show_details => TRUE)"),
    ("duckdb", "ai_generate(body, model := 'llama3.1-8b', show_details := true)"),
    ("bigquery", "JSON_OBJECT('choices', JSON_ARRAY(JSON_OBJECT('messages', AI.GENERATE(body, "
                 "endpoint => 'llama3.1-8b').result)), 'created', UNIX_SECONDS("
                 "CURRENT_TIMESTAMP()), 'model', NULL, 'usage', NULL)"),
    ("databricks", "TO_JSON(NAMED_STRUCT('choices', ARRAY(NAMED_STRUCT('messages', ai_query("
                   "'llama3.1-8b', body))), 'created', UNIX_TIMESTAMP(), 'model', NULL, "
                   "'usage', NULL))"),
])
def test_show_details_in_every_warehouse(write, expected, caplog):
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.transpile"):
        out = transpile(DETAILS, "snowflake", write, keep_source=False)
    assert out == f"SELECT {expected} AS d FROM t"
    rebuilt = [w for w in _warnings(caplog) if "show_details object" in w]
    assert len(rebuilt) == (write in ("bigquery", "databricks")), _warnings(caplog)


@pytest.mark.parametrize("sql", [
    DETAILS,
    "SELECT SNOWFLAKE.CORTEX.COMPLETE('m', body, {'max_tokens': 5}) FROM t",
    "SELECT SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': 'user', 'content': body}], {}) FROM t",
])
def test_show_details_calls_answer_the_whole_object(sql):
    op, = parse(sql, "snowflake").ai_ops
    assert shapes.shows_details(op) and op.output_type == "JSON"
    again, = parse(transpile(sql, "snowflake", "duckdb"), "duckdb").ai_ops
    assert shapes.shows_details(again) and again.output_type == "JSON"


@pytest.mark.parametrize(("read", "write", "sql", "expected"), [
    ("snowflake", "bigquery",
     "SELECT AI_CLASSIFY(body, ['a', 'b'], {'examples': [{'input': 'x', 'labels': ['a']}]})"
     ":labels[0]::string FROM t",
     "SELECT AI.CLASSIFY(body, categories => ['a', 'b'], examples => [('x', 'a')]) FROM t"),
    ("snowflake", "bigquery",
     "SELECT AI_CLASSIFY(body, ['a', 'b'], {'output_mode': 'multi', 'examples': [{'input': "
     "'x', 'labels': ['a', 'b']}]}):labels FROM t",
     "SELECT AI.CLASSIFY(body, categories => ['a', 'b'], output_mode => 'multi', "
     "examples => [('x', ['a', 'b'])]) FROM t"),
    ("bigquery", "snowflake",
     "SELECT AI.CLASSIFY(body, ['a', 'b'], examples => [(\"it's good\", 'a')]) FROM t",
     "SELECT AI_CLASSIFY(body, ['a', 'b'], {'examples': [{'input': 'it\\'s good', "
     "'labels': ['a']}]}):labels[0]::STRING FROM t"),
    ("bigquery", "bigquery",
     "SELECT AI.IF(body, examples => [('good', TRUE), ('bad', FALSE)]) FROM t",
     "SELECT AI.IF(body, examples => [('good', TRUE), ('bad', FALSE)]) FROM t"),
])
def test_examples_carried_where_the_target_takes_them(read, write, sql, expected, caplog):
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.transpile"):
        out = transpile(sql, read, write, keep_source=False)
    assert out == expected
    assert not [w for w in _warnings(caplog) if "examples" in w]


@pytest.mark.parametrize(("read", "write", "sql"), [
    ("bigquery", "snowflake", "SELECT AI.IF(body, examples => [('good', TRUE)]) FROM t"),
    ("bigquery", "databricks", "SELECT AI.IF(body, examples => [('good', TRUE)]) FROM t"),
    ("bigquery", "duckdb", "SELECT AI.IF(body, examples => [('good', TRUE)]) FROM t"),
    ("snowflake", "databricks", "SELECT AI_CLASSIFY(body, ['a', 'b'], {'examples': [{'input': "
                                "'x', 'labels': ['a']}]}):labels[0]::string FROM t"),
])
def test_examples_dropped_with_a_warning(read, write, sql, caplog):
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.transpile"):
        out = transpile(sql, read, write)
    assert "good" not in out and "'x'" not in out
    assert [w for w in _warnings(caplog) if "examples; the call's 1 are dropped" in w], \
        _warnings(caplog)


def test_examples_the_model_is_not_shown_are_warned_about_when_run(caplog):
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.runnable"):
        parse("SELECT AI.IF(body, examples => [('good', TRUE)]) FROM t", "bigquery")
    assert [w for w in _warnings(caplog) if "examples are not shown to the model" in w]


ASPECTS = "SELECT AI_SENTIMENT(body, ['price', 'fit']) AS s FROM t"


@pytest.mark.parametrize(("write", "expected"), [
    ("snowflake", "SELECT AI_SENTIMENT(body, ['price', 'fit']) AS s FROM t"),
    ("duckdb", "SELECT ai_classify(body, ['positive', 'negative', 'neutral', 'mixed', "
               "'unknown'], task := 'sentiment', output_type := 'JSON', "
               "aspects := '[\"price\", \"fit\"]') AS s FROM t"),
    ("bigquery", None),
    ("databricks", None),
])
def test_sentiment_aspects_carried_or_refused(write, expected):
    if expected is None:
        with pytest.raises(UnsupportedError, match="no sentiment per aspect"):
            transpile(ASPECTS, "snowflake", write)
        return
    out = transpile(ASPECTS, "snowflake", write, keep_source=False)
    assert out == expected
    op, = parse(out, write).ai_ops
    assert dict(op.task_args)["aspects"] == '["price", "fit"]' and op.output_type == "JSON"


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT AI.GENERATE(body, request_type => 'FOO').result FROM t",
     "request_type must be one of shared, dedicated, unspecified, got 'FOO'"),
    ("SELECT AI.IF(body, optimization_mode => 'FAST') FROM t",
     "optimization_mode must be one of minimize_cost, maximize_quality, got 'FAST'"),
    ("SELECT AI.CLASSIFY(body, ['a', 'b'], optimization_mode => 'cheap') FROM t",
     "optimization_mode must be one of minimize_cost, maximize_quality, got 'cheap'"),
])
def test_bigquery_enumerated_options_checked(sql, message):
    with pytest.raises(ArgumentError) as info:
        parse(sql, "bigquery", runnable=False)
    assert message in str(info.value) and "in: AI." in str(info.value)


@pytest.mark.parametrize("sql", [
    "SELECT AI.GENERATE(body, request_type => 'DEDICATED').result FROM t",
    "SELECT AI.IF(body, optimization_mode => 'MINIMIZE_COST') FROM t",
])
def test_bigquery_documented_option_values_pass(sql):
    assert len(parse(sql, "bigquery").ai_ops) == 1


def test_extraction_scores_refused_for_running_but_transpiled():
    sql = "SELECT AI_EXTRACT(text => body, responseFormat => ['q'], scores => TRUE) FROM t"
    with pytest.raises(UnsupportedError, match="no confidence per field"):
        parse(sql, "snowflake")
    assert "scores := true" in transpile(sql, "snowflake", "duckdb")


@pytest.mark.parametrize("shape", [
    "labels_object", "labels_object_multi", "label_object", "sentiment_object", "answer_array",
    "list1", "response_object", "response_object_multi",
])
def test_a_null_answer_is_a_null_shape(shape):
    """A NULL or blank input answers NULL: its vendor shape is NULL, not ["null"] or
    {"response": [null]} (extraction and error shapes carry the reason in their error field)."""
    value = exp.cast(exp.null(), "VARCHAR")
    sql = shapes.wrap(shape, value).sql(dialect="duckdb")
    assert duckdb.connect().execute(f"SELECT {sql}").fetchall() == [(None,)]


def test_other_dialects_readings_log_no_sqlglot_warnings(caplog):
    """An error's dialect hint reads the statement in every dialect: sqlglot's warnings about
    those readings ('Cannot convert array columns into map', three times) are not the user's."""
    from quail_engine.sql.dialect_guess import dialect_hint

    sql = "SELECT ai_classify(body, '[\"a\",\"b\"]', map('multilable', 'true')) FROM t"
    with caplog.at_level(logging.WARNING):
        dialect_hint(sql, "databricks")
    assert not [r for r in caplog.records if r.name.startswith("sqlglot")], caplog.records


@pytest.mark.parametrize(("dialect", "sql", "quoted"), [
    ("databricks", "SELECT ai_query('ep', body, files => f) FROM t", "(f)"),
    ("bigquery", "SELECT AI.GENERATE(('Describe ', OBJ.GET_ACCESS_URL(OBJ.MAKE_REF(uri, "
                 "'us.conn'), 'r'))).result FROM t", "(OBJ.GET_ACCESS_URL("),
    ("bigquery", "SELECT AI.IF(('Is it a cat? ', OBJ.MAKE_REF(uri, 'us.conn'))) FROM t",
     "(OBJ.MAKE_REF("),
])
def test_file_arguments_refused_for_running(dialect, sql, quoted):
    """Databricks' files => was dropped (the prompt asked without it); BigQuery ObjectRefs were
    planned and failed in DuckDB."""
    with pytest.raises(UnsupportedError, match="with a file argument") as info:
        parse(sql, dialect)
    assert quoted in str(info.value)


@pytest.mark.parametrize(("read", "write", "sql"), [
    ("databricks", "bigquery", "SELECT ai_query('ep', body, files => f) FROM t"),
    ("snowflake", "databricks", "SELECT AI_COMPLETE('m', 'describe', TO_FILE('@s', 'a.png')) "
                                "FROM t"),
])
def test_a_file_written_into_another_warehouses_prompt_is_warned_about(read, write, sql, caplog):
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.transpile"):
        transpile(sql, read, write)
    assert [w for w in _warnings(caplog) if "file argument" in w], _warnings(caplog)
