"""Options checked against the vendors' documented limits when the query is read: one
ArgumentError each, naming the function and the limit and quoting the SQL."""

import json

import pytest

from quail_engine.sql import parse
from quail_engine.sql.errors import ArgumentError

LABELS_21 = ", ".join(f"'l{i}'" for i in range(21))
LABELS_501 = json.dumps([f"l{i}" for i in range(501)])

CASES = [
    # (dialect, sql, function named, words, fragment quoted)
    ("snowflake", "SELECT AI_FILTER(123) FROM t", "AI_FILTER",
     "input must be text, not a number or boolean literal", "123"),
    ("bigquery", "SELECT AI.IF(TRUE) FROM t", "AI.IF", "input must be text", "TRUE"),
    ("duckdb", "SELECT ai_classify(-1, ['a', 'b']) FROM t", "AI_CLASSIFY", "input must be text",
     "-1"),
    ("snowflake", "SELECT AI_COMPLETE('m', body, {'max_tokens': 100000}) FROM t", "AI_COMPLETE",
     "max_tokens must be an integer in [1, 8192], got 100000", "AI_COMPLETE('m', body"),
    ("snowflake", "SELECT AI_COMPLETE('m', body, {'max_tokens': 0}) FROM t", "AI_COMPLETE",
     "max_tokens must be an integer in [1, 8192], got 0", "AI_COMPLETE('m', body"),
    ("snowflake", "SELECT AI_COMPLETE('m', body, {'max_tokns': 10}) FROM t", "AI_COMPLETE",
     "unknown key 'max_tokns' in model_parameters; known: temperature, top_p, max_tokens, "
     "guardrails", "AI_COMPLETE('m', body"),
    ("snowflake", "SELECT SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': 'user', 'content': body}], "
     "{'temprature': 0.1}) FROM t", "SNOWFLAKE.CORTEX.COMPLETE",
     "unknown key 'temprature' in the options", "SNOWFLAKE.CORTEX.COMPLETE('m'"),
    ("snowflake", "SELECT AI_CLASSIFY(body, ['a', 'b'], {'task_descripton': 'x'}) FROM t",
     "AI_CLASSIFY", "unknown key 'task_descripton' in the config; known: task_description, "
     "output_mode, examples", "AI_CLASSIFY(body"),
    ("snowflake", "SELECT AI_SIMILARITY(a, b, {'modle': 'x'}) FROM t", "AI_SIMILARITY",
     "unknown key 'modle' in the config; known: model", "AI_SIMILARITY(a, b"),
    ("databricks", "SELECT ai_classify(body, '[\"a\", \"b\"]', map('multilabl', 'true')) FROM t",
     "AI_CLASSIFY", "unknown key 'multilabl' in the options; known: version, instructions, "
     "multilabel", "ai_classify(body"),
    ("bigquery", "SELECT * FROM ML.GENERATE_TEXT(MODEL m, TABLE t, STRUCT(0.2 AS temprature))",
     "ML.GENERATE_TEXT", "unknown key 'temprature' in the parameter STRUCT", "ML.GENERATE_TEXT("),
    ("databricks", f"SELECT ai_classify(body, ARRAY({LABELS_21})) FROM t", "AI_CLASSIFY",
     "with an ARRAY of labels (v1) takes at most 20 labels, got 21", "ai_classify(body, ARRAY("),
    ("databricks", "SELECT ai_classify(body, ARRAY('a', 'b'), map('multilabel', 'true')) FROM t",
     "AI_CLASSIFY", "with an ARRAY of labels (v1) takes no options; write the labels as a JSON "
     "string", "ai_classify(body, ARRAY("),
    ("databricks", f"SELECT ai_classify(body, '{LABELS_501}') FROM t", "AI_CLASSIFY",
     "with JSON labels (v2) takes at most 500 labels, got 501", "ai_classify(body, '["),
    ("snowflake", f"SELECT AI_CLASSIFY(body, {LABELS_501.replace(chr(34), chr(39))}) FROM t",
     "AI_CLASSIFY", "takes at most 500 labels, got 501", "AI_CLASSIFY(body, ["),
    ("snowflake", "SELECT SNOWFLAKE.CORTEX.CLASSIFY_TEXT(body, "
     f"[{', '.join(repr(f'l{i}') for i in range(101))}]) FROM t",
     "SNOWFLAKE.CORTEX.CLASSIFY_TEXT", "takes at most 100 labels, got 101", "CLASSIFY_TEXT(body"),
    ("snowflake", "SELECT AI_TRANSLATE(body, 'en', 'xx') FROM t", "AI_TRANSLATE",
     "target_language must be one of the documented codes ar, zh", "AI_TRANSLATE(body, 'en'"),
    ("snowflake", "SELECT SNOWFLAKE.CORTEX.TRANSLATE(body, 'english', 'de') FROM t",
     "SNOWFLAKE.CORTEX.TRANSLATE", "source_language must be one of the documented codes '', ar",
     "TRANSLATE(body, 'english', 'de')"),
    ("databricks", "SELECT ai_translate(body, 'ja') FROM t", "AI_TRANSLATE",
     "to_lang must be one of the documented codes en, de, fr, it, pt, hi, es, th, got 'ja'",
     "ai_translate(body, 'ja')"),
    ("bigquery", "SELECT AI.GENERATE(body, output_schema => 'a FOO, b INT64') FROM t",
     "AI.GENERATE", "output_schema field 'a' has the type 'FOO'; the documented types are STRING",
     "AI.GENERATE(body"),
    ("bigquery", "SELECT AI.GENERATE(body, output_schema => 'a STRUCT<x INT64, y DATETIME>') "
     "FROM t", "AI.GENERATE", "the type 'DATETIME'", "AI.GENERATE(body"),
    ("bigquery", "SELECT * FROM AI.GENERATE_TABLE(MODEL m, TABLE t, STRUCT('a FOO' AS "
     "output_schema))", "AI.GENERATE_TABLE", "the type 'FOO'", "AI.GENERATE_TABLE(MODEL m"),
]


@pytest.mark.parametrize(("dialect", "sql", "function", "words", "fragment"), CASES,
                         ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_refused_at_parse_time(dialect, sql, function, words, fragment):
    with pytest.raises(ArgumentError) as info:
        parse(sql, dialect)
    message = str(info.value)
    assert message.startswith(function) and words in message, message
    assert f"[{dialect}] in: " in message and fragment in message, message


ACCEPTED = [
    ("snowflake", "SELECT AI_COMPLETE('m', body, {'max_tokens': 8192, 'guardrails': TRUE}) FROM t"),
    ("snowflake", "SELECT AI_TRANSLATE(body, '', 'DE') FROM t"),
    ("databricks", f"SELECT ai_classify(body, ARRAY({LABELS_21[:-7]})) FROM t"),
    ("databricks", "SELECT ai_translate(body, 'th') FROM t"),
    ("bigquery", "SELECT AI.GENERATE(body, output_schema => 'a STRING, b ARRAY<STRING>, "
     "c STRUCT<x INT64, y ARRAY<BOOL>>') FROM t"),
    ("snowflake", "SELECT AI_FILTER(PROMPT('Is {0} large?', 5)) FROM t"),
]


@pytest.mark.parametrize(("dialect", "sql"), ACCEPTED)
def test_documented_values_are_accepted(dialect, sql):
    assert len(parse(sql, dialect).ai_ops) == 1


def test_nested_output_schema_fields_stay_whole():
    (op,) = parse("SELECT AI.GENERATE(body, output_schema => 'a STRING, c STRUCT<x INT64, "
                  "y BOOL>') FROM t", "bigquery").ai_ops
    assert [lb.name for lb in op.labels] == ["a", "c"]
