"""Transpile faults a user audit found: each rewritten statement asks the model as often as
the source does and is spelled as the target vendor documents it."""

import logging
import re

import duckdb
import pytest

from quail_engine.sql import parse, transpile
from quail_engine.sql.errors import UnsupportedError

GENERATE = "AI.GENERATE(('Extract the name from ', txt), output_schema => 'name STRING, age INT64')"
EXTRACT = "AI_EXTRACT(PROMPT('Extract the name from {0}', txt), ['name', 'age'])"


def test_one_output_schema_field_read_in_snowflake_calls_ai_extract_once():
    out = transpile(f"SELECT {GENERATE}.name AS n FROM t", "bigquery", "snowflake")
    assert out == f"SELECT JSON_EXTRACT_PATH_TEXT({EXTRACT}:response, 'name') AS n FROM t"


def test_the_whole_output_schema_struct_in_snowflake_calls_ai_extract_once():
    out = transpile(f"SELECT {GENERATE} AS r FROM t", "bigquery", "snowflake")
    assert out.count("AI_EXTRACT(") == 1, out
    assert out.startswith(f"SELECT TRANSFORM(ARRAY_CONSTRUCT({EXTRACT}:response), quail_v -> "
                          "OBJECT_CONSTRUCT('name', JSON_EXTRACT_PATH_TEXT(quail_v, 'name'), "), out
    assert out.endswith(")[0] AS r FROM t"), out
    assert len(parse(out, "snowflake").ai_ops) == 1


EXTRACT_DUCKDB = ("ai_extract(prompt('Extract the name from {0}', txt), ['name', 'age'], "
                  "output_schema := 'name STRING, age INT64')")


def test_the_whole_output_schema_struct_in_duckdb_calls_ai_extract_once():
    """It named ai_extract four times (name, age, full_response, status): four model calls per
    row wherever quail does not plan the statement."""
    out = transpile(f"SELECT {GENERATE} AS r FROM t", "bigquery", "duckdb")
    assert out == (
        f"SELECT LIST_TRANSFORM([{EXTRACT_DUCKDB}], LAMBDA quail_v : {{'name': (quail_v ->> "
        "'$.name'), 'age': TRY(CAST(quail_v -> '$.age' AS BIGINT)), 'full_response': quail_v, "
        "'status': COALESCE(CASE WHEN quail_v IS NULL THEN 'no answer: a NULL input, or the "
        "model did not complete an answer of the requested type within max_output_tokens' END, "
        "CONCAT_WS('; ', CASE WHEN TRY(CAST(quail_v -> '$.age' AS BIGINT)) IS NULL AND "
        "CAST(quail_v -> '$.age' AS TEXT) <> 'null' THEN 'age: the answer ' || CAST(quail_v -> "
        "'$.age' AS TEXT) || ' is not a valid INT64' END))})[1] AS r FROM t")
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 'Ann is 41' AS txt")
    answered = out.replace(EXTRACT_DUCKDB, """'{"name": "Ann", "age": 41}'::JSON""")
    assert con.execute(answered).fetchone()[0] == {
        "name": "Ann", "age": 41, "full_response": '{"name": "Ann", "age": 41}', "status": ""}
    unanswered = con.execute(out.replace(EXTRACT_DUCKDB, "NULL::JSON")).fetchone()[0]
    assert unanswered["name"] is None and unanswered["status"].startswith("no answer"), unanswered


MULTI_DBX = ("from_json(ai_classify(txt, '[\"a\", \"b\"]', map('multilabel', 'true')):response, "
             "'array<string>')")


def test_a_multi_label_array_unnested_into_databricks_is_read_with_from_json():
    out = transpile("SELECT label FROM t CROSS JOIN UNNEST(AI.CLASSIFY(txt, categories => "
                    "['a', 'b'], output_mode => 'multi')) AS label", "bigquery", "databricks")
    assert out == f"SELECT label FROM t LATERAL VIEW EXPLODE({MULTI_DBX}) AS label"


def test_a_flattened_multi_label_variant_into_databricks_is_read_with_from_json():
    out = transpile("SELECT f.value::STRING AS label FROM t, LATERAL FLATTEN(input => "
                    "AI_CLASSIFY(txt, ['a', 'b'], {'output_mode': 'multi'}):labels) f",
                    "snowflake", "databricks")
    assert out == (f"SELECT CAST(f.value AS STRING) AS label FROM t LATERAL VIEW EXPLODE("
                   f"{MULTI_DBX}) f AS value")


MULTI_SRC = ("from_json(ai_classify(txt, '[\"a\",\"b\"]', map('multilabel','true')):response, "
             "'array<string>')")
MULTI_SF = "AI_CLASSIFY(txt, ['a', 'b'], {'output_mode': 'multi'}):labels"
MULTI_BQ = "AI.CLASSIFY(txt, categories => ['a', 'b'], output_mode => 'multi')"


@pytest.mark.parametrize(("write", "sql", "expected"), [
    ("snowflake", f"SELECT id, explode({MULTI_SRC}) AS label FROM t",
     f"SELECT id, CAST(label.value AS VARCHAR) AS label FROM t, LATERAL FLATTEN(input => "
     f"{MULTI_SF}) AS label"),
    ("bigquery", f"SELECT id, explode({MULTI_SRC}) AS label FROM t",
     f"SELECT id, label FROM t CROSS JOIN UNNEST({MULTI_BQ}) AS label"),
    ("snowflake", f"SELECT label FROM t LATERAL VIEW explode({MULTI_SRC}) x AS label "
     "WHERE x.label <> 'a'",
     f"SELECT CAST(x.value AS VARCHAR) AS label FROM t, LATERAL FLATTEN(input => {MULTI_SF}) "
     "AS x WHERE CAST(x.value AS VARCHAR) <> 'a'"),
    ("bigquery", f"SELECT label, COUNT(*) FROM t LATERAL VIEW explode({MULTI_SRC}) AS label "
     "GROUP BY label",
     f"SELECT label, COUNT(*) FROM t CROSS JOIN UNNEST({MULTI_BQ}) AS label GROUP BY label"),
])
def test_an_exploded_ai_array_is_one_call_unnested_in_the_targets_idiom(write, sql, expected):
    """sqlglot wrote the projection's explode as a GENERATE_ARRAY position join naming the
    call four times, and LATERAL VIEW as itself, which neither target parses."""
    out = transpile(sql, "databricks", write)
    assert out == expected
    assert len(parse(out, write).ai_ops) == 1


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


DBX_FORMAT = ("SELECT ai_query('ep', CONCAT('Extract from ', txt), responseFormat => "
              "'STRUCT<name: STRING, age: INT>') AS j FROM t")
SF_FORMAT = ("SELECT AI_COMPLETE('m', CONCAT('Extract from ', txt), {}, {'type': 'json', 'schema': "
             "{'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': "
             "'integer'}}, 'required': ['name', 'age']}}) AS j FROM t")
SCHEMA_SF = ("{'type': 'object', 'properties': {'name': {'type': 'string'}, 'age': {'type': "
             "'integer'}}, 'required': ['name', 'age'], 'additionalProperties': FALSE}")
SCHEMA_JSON = ('{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": '
               '"integer"}}, "required": ["name", "age"], "additionalProperties": false}')


def test_a_databricks_response_format_is_carried_into_ai_complete(caplog):
    """It was dropped with a warning that AI_COMPLETE has no spelling for it."""
    out = transpile(DBX_FORMAT, "databricks", "snowflake")
    assert out == (f"SELECT AI_COMPLETE('ep', PROMPT('Extract from {{0}}', txt), {{}}, "
                   f"{{'type': 'json', 'schema': {SCHEMA_SF}}}) AS j FROM t")
    assert not [w for w in _warnings(caplog) if "esponse" in w], _warnings(caplog)


def test_a_snowflake_response_format_is_carried_into_ai_query(caplog):
    """It was dropped with a warning that ai_query has no spelling for it."""
    out = transpile(SF_FORMAT, "snowflake", "databricks")
    assert out == ("SELECT ai_query('m', CONCAT('Extract from ', txt), responseFormat => "
                   '\'{"type": "json_schema", "json_schema": {"name": "response", "schema": '
                   f'{SCHEMA_JSON}, "strict": true}}}}\') AS j FROM t')
    assert not [w for w in _warnings(caplog) if "esponse" in w], _warnings(caplog)


def test_a_response_format_ai_gen_cannot_take_is_warned_about_truly(caplog):
    out = transpile("SELECT ai_generate(txt, response_format := 'TYPE OBJECT(name STRING)') "
                    "AS j FROM t", "duckdb", "databricks")
    assert out == "SELECT ai_gen(txt) AS j FROM t"
    assert _warnings(caplog) == ["ai_generate -> databricks: the response_format TYPE OBJECT(name "
                                 "STRING) is dropped: ai_gen (no endpoint) takes no "
                                 "responseFormat; the answer is free text"]


def test_a_snowflake_response_format_becomes_a_bigquery_output_schema(caplog):
    """It was dropped (the legacy COMPLETE's option silently): the same fields are now
    AI.GENERATE's output_schema, its STRUCT written back as the JSON text AI_COMPLETE answers."""
    out = transpile(SF_FORMAT, "snowflake", "bigquery")
    assert out == ("SELECT (SELECT IF(quail_v.status = '', TO_JSON_STRING(STRUCT(quail_v.name AS "
                   "name, quail_v.age AS age)), NULL) FROM UNNEST([AI.GENERATE(('Extract from ', "
                   "txt), endpoint => 'm', output_schema => 'name STRING, age INT64')]) AS "
                   "quail_v) AS j FROM t")
    assert not [w for w in _warnings(caplog) if "esponse" in w], _warnings(caplog)
    legacy = transpile("SELECT SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': 'user', 'content': txt}], "
                       "{'response_format': {'type': 'json', 'schema': {'type': 'object', "
                       "'properties': {'name': {'type': 'string'}}}}}) AS j FROM t",
                       "snowflake", "bigquery")
    assert "output_schema => 'name STRING')]) AS quail_v" in legacy, legacy


def test_a_response_format_output_schema_cannot_say_is_warned_about_once(caplog):
    out = transpile("SELECT AI_COMPLETE('m', txt, {}, {'type': 'json', 'schema': {'type': "
                    "'object', 'properties': {'kind': {'type': 'string', 'enum': ['a', 'b']}}}}) "
                    "AS j, AI_COMPLETE('m', txt, {}, {'type': 'json', 'schema': {'type': "
                    "'object', 'properties': {'kind': {'type': 'string', 'enum': ['a', 'b']}}}}) "
                    "AS k FROM t", "snowflake", "bigquery")
    assert out == ("SELECT AI.GENERATE(txt, endpoint => 'm').result AS j, AI.GENERATE(txt, "
                   "endpoint => 'm').result AS k FROM t")
    dropped = [w for w in _warnings(caplog) if "response_format" in w]
    assert len(dropped) == 1, dropped
    assert dropped[0].startswith("AI_COMPLETE -> bigquery: the response_format has no "
                                 "output_schema spelling"), dropped


@pytest.mark.parametrize("write, age", [
    ("snowflake", f"TRY_CAST(CAST(GET_PATH(PARSE_JSON({EXTRACT}:response), 'age') AS VARCHAR) "
                  "AS BIGINT)"),
    ("databricks", "TRY_CAST(ai_extract(CONCAT('Extract the name from ', txt), "
                   "'[\"name\", \"age\"]'):response:age AS BIGINT)"),
])
def test_a_typed_field_that_does_not_convert_is_null_in_the_target_not_an_aborted_query(
        write, age, caplog):
    # sqlglot drops DuckDB's TRY(CAST(...)) with 'Unsupported TRY function', leaving a CAST
    # that fails the warehouse's whole query on one answer like 'about forty'
    with caplog.at_level(logging.WARNING):
        out = transpile(f"SELECT {GENERATE}.age AS a FROM t", "bigquery", write)
    assert out == f"SELECT {age} AS a FROM t"
    assert "Unsupported TRY" not in caplog.text


def test_a_nested_field_into_snowflake_keeps_its_cast():
    # Snowflake's TRY_CAST takes only a string; the grammar already wrote the array it casts
    out = transpile("SELECT AI.GENERATE(('Tags of ', txt), output_schema => 'tags ARRAY<STRING>')"
                    ".tags AS g FROM t", "bigquery", "snowflake")
    assert "CAST(GET_PATH(PARSE_JSON(" in out and "AS ARRAY(VARCHAR))" in out, out
    assert "TRY_CAST(CAST(GET_PATH" not in out, out


@pytest.mark.parametrize(("read", "sql", "write", "expected"), [
    ("snowflake", "SELECT AI_CLASSIFY(txt, ['a','b'], {'output_mode':'multi'}) AS r FROM t",
     "databricks", f"SELECT TRANSFORM(ARRAY({MULTI_DBX}), quail_v -> CASE WHEN NOT quail_v IS "
     "NULL THEN TO_JSON(NAMED_STRUCT('labels', quail_v)) END)[0] AS r FROM t"),
    ("databricks", "SELECT ai_classify(txt, '[\"a\", \"b\"]', map('multilabel', 'true')) AS r "
     "FROM t", "snowflake", f"SELECT TRANSFORM(ARRAY_CONSTRUCT({MULTI_SF}), quail_v -> CASE "
     "WHEN NOT quail_v IS NULL THEN OBJECT_CONSTRUCT_KEEP_NULL('response', quail_v, "
     "'error_message', NULL) END)[0] AS r FROM t"),
    ("databricks", "SELECT ai_classify(txt, '[\"a\", \"b\"]', map('multilabel', 'true')) AS r "
     "FROM t", "bigquery", "SELECT (SELECT CASE WHEN NOT quail_v IS NULL THEN JSON_OBJECT("
     f"'response', quail_v, 'error_message', NULL) END FROM UNNEST([{MULTI_BQ}]) AS quail_v) "
     "AS r FROM t"),
])
def test_a_rebuilt_multi_label_object_holds_the_labels_as_an_array(read, sql, write, expected):
    """A to_json around the labels inside TO_JSON(NAMED_STRUCT(...)) (or OBJECT_CONSTRUCT)
    made them a JSON string in the object: {"labels": "[\\"a\\"]"}, not {"labels": ["a"]}."""
    assert transpile(sql, read, write) == expected


NO_ANSWER = ("'no answer: a NULL input, or the model did not complete an answer of the requested "
             "type within {}'")
FAILED_INT = "ai_generate(body, model := 'ep', on_error := 'details', output_type := 'BIGINT', " \
             "returnType := 'INT')"


@pytest.mark.parametrize(("read", "sql", "write", "expected"), [
    ("bigquery", "SELECT AI.GENERATE(body).status AS s FROM t", "duckdb",
     "SELECT COALESCE(CASE WHEN ai_generate(body) IS NULL THEN "
     f"{NO_ANSWER.format('max_output_tokens')} END, '') AS s FROM t"),
    ("bigquery", "SELECT AI.GENERATE(body).status AS s FROM t", "snowflake",
     "SELECT COALESCE(CASE WHEN AI_COMPLETE('llama3.1-8b', body) IS NULL THEN "
     f"{NO_ANSWER.format('max_output_tokens')} END, '') AS s FROM t"),
    ("databricks", "SELECT ai_query('ep', body, returnType => 'INT', failOnError => false) AS r "
     "FROM t", "duckdb", f"SELECT LIST_TRANSFORM([{FAILED_INT}], LAMBDA quail_v : {{'result': "
     f"quail_v, 'errorMessage': CASE WHEN quail_v IS NULL THEN {NO_ANSWER.format('max_tokens')} "
     "END})[1] AS r FROM t"),
])
def test_the_no_answer_status_names_the_token_option_of_the_users_dialect(read, sql, write,
                                                                            expected):
    """A BigQuery status said 'within max_tokens', an option BigQuery users do not have (theirs
    is max_output_tokens); the other dialects' text is unchanged."""
    assert transpile(sql, read, write) == expected


FLAT_JSON = "FROM_JSON(t.j, 'array<string>')"
FLAT_AI = "AI_CLASSIFY(txt, ['a', 'b'], {'output_mode': 'multi'}):labels"


@pytest.mark.parametrize(("write", "sql", "expected"), [
    ("databricks", "SELECT f.value FROM t, TABLE(FLATTEN(input => PARSE_JSON(t.j))) f",
     f"SELECT f.value FROM t LATERAL VIEW EXPLODE({FLAT_JSON}) f AS value"),
    ("databricks", "SELECT f.value, f.index FROM t, LATERAL FLATTEN(input => PARSE_JSON(t.j)) f",
     f"SELECT f.value, f.index FROM t LATERAL VIEW POSEXPLODE({FLAT_JSON}) f AS index, value"),
    ("databricks", "SELECT value::STRING AS v FROM t, LATERAL FLATTEN(PARSE_JSON(t.j), "
     "outer => TRUE)",
     f"SELECT CAST(value AS STRING) AS v FROM t LATERAL VIEW OUTER EXPLODE({FLAT_JSON}) AS value"),
    ("databricks", "SELECT f.value:name::STRING AS n FROM t, LATERAL FLATTEN(input => t.v, "
     "path => 'a.items', mode => 'ARRAY') f",
     "SELECT GET_JSON_OBJECT(f.value, '$.name') AS n FROM t LATERAL VIEW EXPLODE(FROM_JSON("
     "t.v:a.items, 'array<string>')) f AS value"),
    ("databricks", f"SELECT f.value, f.index FROM t, TABLE(FLATTEN(input => {FLAT_AI})) f",
     f"SELECT f.value, f.index FROM t LATERAL VIEW POSEXPLODE({MULTI_DBX}) f AS index, value"),
    ("databricks", f"SELECT f.index FROM t, LATERAL FLATTEN(input => {FLAT_AI}) f",
     f"SELECT f.index FROM t LATERAL VIEW POSEXPLODE({MULTI_DBX}) f AS index, value"),
    ("bigquery", "SELECT f.value FROM t, TABLE(FLATTEN(input => PARSE_JSON(t.j))) f",
     "SELECT f AS value FROM t, UNNEST(JSON_QUERY_ARRAY(PARSE_JSON(t.j))) AS f"),
    ("bigquery", "SELECT f.value::STRING AS v, f.index FROM t, LATERAL FLATTEN(input => "
     "PARSE_JSON(t.j)) f",
     "SELECT JSON_VALUE(f) AS v, f_index AS index FROM t, UNNEST(JSON_QUERY_ARRAY(PARSE_JSON("
     "t.j))) AS f WITH OFFSET AS f_index"),
    ("bigquery", "SELECT value FROM t, LATERAL FLATTEN(PARSE_JSON(t.j), outer => TRUE)",
     "SELECT value FROM t LEFT JOIN UNNEST(JSON_QUERY_ARRAY(PARSE_JSON(t.j))) AS value"),
    ("bigquery", "SELECT g.value::STRING AS x FROM t, LATERAL FLATTEN(input => t.j) f, "
     "LATERAL FLATTEN(input => f.value:items) g",
     "SELECT JSON_VALUE(g) AS x FROM t, UNNEST(JSON_QUERY_ARRAY(t.j)) AS f, UNNEST("
     "JSON_QUERY_ARRAY(f, '$.items')) AS g"),
    ("bigquery", f"SELECT f.value::STRING AS label, f.index FROM t, LATERAL FLATTEN(input => "
     f"{FLAT_AI}) f",
     f"SELECT CAST(f AS STRING) AS label, f_index AS index FROM t, UNNEST({MULTI_BQ}) AS f "
     "WITH OFFSET AS f_index"),
])
def test_a_snowflake_flatten_is_the_targets_own_unnesting(write, sql, expected):
    """sqlglot wrote FLATTEN as TABLE(EXPLODE(input => ...)) / LATERAL EXPLODE(input => ...),
    which neither warehouse parses, and an AI list's INDEX as a column its UNNEST lacked."""
    out = transpile(sql, "snowflake", write)
    assert out == expected
    assert len(parse(out, write).ai_ops) == sql.count("AI_CLASSIFY")


@pytest.mark.parametrize(("write", "sql", "named"), [
    ("databricks", "SELECT f.key FROM t, LATERAL FLATTEN(input => PARSE_JSON(t.j)) f",
     "FLATTEN's KEY column cannot be written in databricks"),
    ("bigquery", "SELECT f.this FROM t, TABLE(FLATTEN(input => PARSE_JSON(t.j))) f",
     "FLATTEN's THIS column cannot be written in bigquery"),
    ("bigquery", "SELECT path FROM t, LATERAL FLATTEN(input => t.j)",
     "FLATTEN's PATH column cannot be written in bigquery"),
    ("databricks", "SELECT * FROM t, LATERAL FLATTEN(input => t.j, mode => 'ARRAY') f",
     "FLATTEN's columns read by * include KEY, PATH, THIS and SEQ"),
    ("databricks", "SELECT f.value FROM t, LATERAL FLATTEN(input => t.j, mode => 'OBJECT') f",
     "FLATTEN(mode => 'OBJECT') cannot be written in databricks"),
])
def test_a_flatten_column_the_target_cannot_spell_is_refused_by_name(write, sql, named):
    with pytest.raises(UnsupportedError, match=re.escape(named)):
        transpile(sql, "snowflake", write)


def test_a_flatten_over_json_warns_that_an_object_gives_no_rows(caplog):
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.transpile"):
        transpile("SELECT f.value FROM t, LATERAL FLATTEN(input => t.j) f", "snowflake",
                  "databricks")
        transpile("SELECT f.value FROM t, LATERAL FLATTEN(input => t.j, mode => 'ARRAY') f",
                  "snowflake", "databricks")
    assert _warnings(caplog) == ["FLATTEN -> databricks: written as an unnesting of a JSON "
                                 "array: an OBJECT input gives no rows there (Snowflake gives "
                                 "its fields)"]


def test_a_flatten_into_duckdb_runs_there_as_snowflake_answers():
    """sqlglot wrote TABLE(UNNEST(input => JSON(t.j))), which DuckDB does not parse; it is the
    run's own json_each form now."""
    out = transpile("SELECT f.value::STRING AS v, f.index AS i FROM t, TABLE(FLATTEN(input => "
                    "PARSE_JSON(t.j))) f ORDER BY i", "snowflake", "duckdb")
    con = duckdb.connect()
    con.execute("""CREATE TABLE t AS SELECT '["a", "b"]' AS j""")
    assert con.execute(out).fetchall() == [("a", 0), ("b", 1)]


SENTIMENT_FORMAT = ("{'type': 'json', 'schema': {'type': 'object', 'properties': {'sentiment': "
                    "{'type': 'string', 'enum': ['positive', 'negative']}}, 'required': "
                    "['sentiment']}}")
COMPLETE_FORMAT = ("SELECT SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': 'user', 'content': "
                   f"'Review: ' || body}}], {{'temperature': 0, 'response_format': "
                   f"{SENTIMENT_FORMAT}}}) AS r FROM reviews")


def test_completes_response_format_option_is_carried_into_duckdb():
    """It was dropped: `ai_generate(..., show_details := true)` alone, whose run answers free
    text in `choices`; the option is now ai_generate's response_format, AI_COMPLETE's spelling,
    and the call read back is decoded under the same schema."""
    out = transpile(COMPLETE_FORMAT, "snowflake", "duckdb")
    assert out == ("SELECT ai_generate(prompt('Review: {0}', body), model := 'm', on_error := "
                   "'fail', temperature := 0, response_format := '{\"schema\": {\"properties\": "
                   "{\"sentiment\": {\"enum\": [\"positive\", \"negative\"], \"type\": "
                   "\"string\"}}, \"required\": [\"sentiment\"], \"type\": \"object\"}, "
                   "\"type\": \"json\"}', show_details := true) AS r FROM reviews")
    (source,) = parse(COMPLETE_FORMAT, "snowflake").ai_ops
    (again,) = parse(out, "duckdb").ai_ops
    assert again.schema == source.schema and isinstance(again.schema, dict)


NAME_FORMAT = ("{'type': 'json', 'schema': {'type': 'object', 'properties': {'name': {'type': "
               "'string'}}}}")
NAME_DBX = ('responseFormat => \'{"type": "json_schema", "json_schema": {"name": "response", '
            '"schema": {"type": "object", "properties": {"name": {"type": "string"}}, '
            '"required": ["name"], "additionalProperties": false}, "strict": true}}\'')
CHAT = "SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': 'user', 'content': txt}]"


@pytest.mark.parametrize(("write", "sql", "expected"), [
    ("databricks", f"SELECT {CHAT}, {{'response_format': {NAME_FORMAT}}}) AS j FROM t",
     "SELECT TO_JSON(NAMED_STRUCT('created', UNIX_TIMESTAMP(), 'model', NULL, "
     "'structured_output', ARRAY(NAMED_STRUCT('raw_message', try_parse_json(ai_query('m', txt, "
     f"{NAME_DBX})), 'type', 'json')), 'usage', NULL)) AS j FROM t"),
    ("databricks", f"SELECT AI_COMPLETE('m', txt, {{}}, {NAME_FORMAT}, TRUE) AS j FROM t",
     "SELECT TO_JSON(NAMED_STRUCT('created', UNIX_TIMESTAMP(), 'model', NULL, "
     "'structured_output', ARRAY(NAMED_STRUCT('raw_message', try_parse_json(ai_query('m', txt, "
     f"{NAME_DBX})), 'type', 'json')), 'usage', NULL)) AS j FROM t"),
    ("bigquery", f"SELECT {CHAT}, {{'response_format': {NAME_FORMAT}}}) AS j FROM t",
     "SELECT JSON_OBJECT('created', UNIX_SECONDS(CURRENT_TIMESTAMP()), 'model', NULL, "
     "'structured_output', JSON_ARRAY(JSON_OBJECT('raw_message', SAFE.PARSE_JSON((SELECT "
     "IF(quail_v.status = '', TO_JSON_STRING(STRUCT(quail_v.name AS name)), NULL) FROM "
     "UNNEST([AI.GENERATE(txt, endpoint => 'm', output_schema => 'name STRING')]) AS quail_v)), "
     "'type', 'json')), 'usage', NULL) AS j FROM t"),
    # no response format: the text in choices, as quail answers that source
    ("bigquery", f"SELECT {CHAT}, {{'max_tokens': 10}}) AS j FROM t",
     "SELECT JSON_OBJECT('choices', JSON_ARRAY(JSON_OBJECT('messages', AI.GENERATE(txt, "
     "endpoint => 'm', model_params => JSON '{\"generationConfig\": {\"maxOutputTokens\": "
     "10}}').result)), 'created', UNIX_SECONDS(CURRENT_TIMESTAMP()), 'model', NULL, 'usage', "
     "NULL) AS j FROM t"),
])
def test_a_show_details_object_under_a_response_format_is_rebuilt_as_structured_output(
        write, sql, expected):
    """It was rebuilt as `choices` around the answer's text, where quail answers the source
    (and Snowflake documents it) as the parsed object in structured_output[0].raw_message."""
    assert transpile(sql, "snowflake", write) == expected


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT AI_EXTRACT(body, ['name', 'city']):response AS r FROM t",
     "SELECT (SELECT IF(quail_v.status = '', TO_JSON(STRUCT(quail_v.name AS name, quail_v.city "
     "AS city)), NULL) FROM UNNEST([AI.GENERATE(body, output_schema => 'name STRING, city "
     "STRING')]) AS quail_v) AS r FROM t"),
    ("SELECT AI_EXTRACT(body, ['name']) AS r FROM t",
     "SELECT (SELECT JSON_OBJECT('response', quail_v, 'error', CASE WHEN quail_v IS NULL THEN "
     "'no answer: a NULL input, or the model did not complete an answer of the requested type "
     "within max_tokens' END) FROM UNNEST([(SELECT IF(quail_v.status = '', TO_JSON(STRUCT("
     "quail_v.name AS name)), NULL) FROM UNNEST([AI.GENERATE(body, output_schema => 'name "
     "STRING')]) AS quail_v)]) AS quail_v) AS r FROM t"),
])
def test_an_extractions_response_in_bigquery_holds_only_the_fields(sql, expected):
    """It was TO_JSON(AI.GENERATE(..., output_schema => ...)): the whole STRUCT, with
    BigQuery's full_response and status beside the fields Snowflake's response holds."""
    assert transpile(sql, "snowflake", "bigquery") == expected


def test_a_json_text_response_format_is_written_as_a_snowflake_object():
    """DuckDB's `response_format := '<JSON text>'` (COMPLETE's option written there) was put
    into AI_COMPLETE as it is, JSON Snowflake does not parse, so the transpile was refused."""
    out = transpile("SELECT ai_generate(txt, model := 'm', response_format := '{\"type\": "
                    "\"json\", \"schema\": {\"type\": \"object\", \"properties\": {\"name\": "
                    "{\"type\": \"string\"}}}}', show_details := true) AS j FROM t",
                    "duckdb", "snowflake")
    assert out == ("SELECT AI_COMPLETE(model => 'm', prompt => txt, response_format => {'type': "
                   "'json', 'schema': {'type': 'object', 'properties': {'name': {'type': "
                   "'string'}}}}, show_details => TRUE) AS j FROM t")
