"""Each vendor's structured-output form read as the JSON schema the decoder enforces."""

import datetime
import json

import pytest

from quail_engine.sql import parse, shapes
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.response_schema import json_schema

OBJ = {"type": "object", "additionalProperties": False}


def schema_of(sql: str, dialect: str):
    return json_schema(parse(sql, dialect).ai_ops[0])


@pytest.mark.parametrize("sql,dialect,schema", [
    ("SELECT AI_COMPLETE('m', t, response_format => TYPE OBJECT(a STRING, n NUMBER, "
     "xs ARRAY(FLOAT))) FROM d", "snowflake",
     {**OBJ, "properties": {"a": {"type": "string"}, "n": {"type": "integer"},
                            "xs": {"type": "array", "items": {"type": "number"}}},
      "required": ["a", "n", "xs"]}),
    ("SELECT AI_COMPLETE('m', t, response_format => {'type': 'json', 'schema': {'type': "
     "'object', 'properties': {'s': {'type': 'string', 'description': 'why'}}}}) FROM d",
     "snowflake", {**OBJ, "properties": {"s": {"type": "string"}}, "required": ["s"]}),
    ("SELECT ai_query('ep', t, responseFormat => 'STRUCT<ok: BOOLEAN, n: DECIMAL(10, 2)>') "
     "FROM d", "databricks",
     {**OBJ, "properties": {"ok": {"type": "boolean"}, "n": {"type": "number"}},
      "required": ["ok", "n"]}),
    ("SELECT ai_query('ep', t, responseFormat => '{\"type\": \"json_schema\", \"json_schema\": "
     "{\"name\": \"x\", \"schema\": {\"type\": \"object\", \"properties\": {\"k\": {\"type\": "
     "\"integer\"}}}}}') FROM d", "databricks",
     {**OBJ, "properties": {"k": {"type": "integer"}}, "required": ["k"]}),
    ("SELECT ai_query('ep', t, returnType => 'FLOAT') FROM d", "databricks", {"type": "number"}),
    ("SELECT ai_query('ep', t, returnType => 'STRING') FROM d", "databricks", None),
    ("SELECT AI.GENERATE_INT(t).result FROM d", "bigquery", {"type": "integer"}),
    ("SELECT AI.GENERATE_DOUBLE(t).result FROM d", "bigquery", {"type": "number"}),
    ("SELECT AI.GENERATE(t, output_schema => 'name STRING, tags ARRAY<STRING>').name FROM d",
     "bigquery",
     {**OBJ, "properties": {"name": {"type": ["string", "null"]},
                            "tags": {"type": "array", "items": {"type": "string"}}},
      "required": ["name", "tags"]}),
    ("SELECT AI_EXTRACT(t, {'who': 'Who is it?'}) FROM d", "snowflake",
     {**OBJ, "properties": {"who": {"type": ["string", "null"]}}, "required": ["who"]}),
    ("SELECT ai_extract(t, '{\"n\": {\"type\": \"integer\"}}') FROM d", "databricks",
     {**OBJ, "properties": {"n": {"type": ["integer", "null"]}}, "required": ["n"]}),
    ("SELECT AI_COMPLETE('m', t) FROM d", "snowflake", None),
])
def test_structured_forms_become_one_json_schema(sql, dialect, schema):
    assert schema_of(sql, dialect) == schema


def test_the_decoder_gets_the_schema_as_json_text():
    from quail_engine.exec.prompts import OpPrompt

    op = parse("SELECT AI.GENERATE_INT(t).result FROM d", "bigquery").ai_ops[0]
    assert json.loads(OpPrompt.for_op(op).readout().grammar.source) == {"type": "integer"}


@pytest.mark.parametrize("sql,dialect,words", [
    ("SELECT ai_query('ep', t, returnType => 'GEOGRAPHY') FROM d", "databricks", "GEOGRAPHY"),
    ("SELECT AI.GENERATE(t, output_schema => 'where GEOGRAPHY').where FROM d", "bigquery",
     "GEOGRAPHY"),
    ("SELECT AI_COMPLETE('m', t, response_format => {'type': 'json', 'schema': 'x'}) FROM d",
     "snowflake", "response_format needs"),
    ("SELECT ai_query('ep', t, responseFormat => '{\"type\": \"json_schema\"}') FROM d",
     "databricks", "responseFormat needs"),
])
def test_a_format_with_no_json_schema_is_refused_at_parse_time(sql, dialect, words):
    with pytest.raises(ArgumentError, match=words) as info:
        parse(sql, dialect)
    assert info.value.fragment  # the call is quoted


def run_typed(sql: str, dialect: str, answer: str | None) -> tuple[str, object]:
    """`sql` (one AI call, one result column `v`, over d(t) of one row) run by DuckDB with the
    model's JSON `answer` for the call: the column's DuckDB type and its value."""
    import duckdb

    from quail_engine.exec.udfs import create_ai_function

    parsed = parse(sql, dialect)
    con = duckdb.connect()
    con.execute("CREATE TABLE d AS SELECT 'a text' AS t")
    create_ai_function(con, "quail_ai_0", parsed.ai_ops[0], lambda rows: [answer] * len(rows))
    return con.execute(f"SELECT typeof(v), v FROM ({parsed.duckdb_sql}) AS q").fetchone()


NO_ANSWER = {"status": shapes.no_answer_text("bigquery")}
TAGS = "SELECT AI.GENERATE(t, output_schema => 'tags ARRAY<STRING>')"
PERSON = "SELECT AI.GENERATE(t, output_schema => 's STRUCT<name STRING, age INT64>')"
NESTED = "SELECT AI.GENERATE(t, output_schema => 'a ARRAY<STRUCT<b INT64, c BOOL>>')"


@pytest.mark.parametrize("sql,dialect,answer,sql_type,value", [
    # BigQuery output_schema: each field its type; status '' or why a field / the answer is NULL
    (f"{TAGS}.tags AS v FROM d", "bigquery", '{"tags": ["red", "blue"]}', "VARCHAR[]",
     ["red", "blue"]),
    ("SELECT tag AS v FROM d, UNNEST(AI.GENERATE(t, output_schema => 'tags ARRAY<STRING>').tags) "
     "AS tag LIMIT 1", "bigquery", '{"tags": ["red"]}', "VARCHAR", "red"),
    (f"{PERSON}.s.name AS v FROM d", "bigquery", '{"s": {"name": "John", "age": 34}}',
     "VARCHAR", "John"),
    (f"{PERSON}.s AS v FROM d", "bigquery", '{"s": {"name": "John", "age": 34}}',
     'STRUCT("name" VARCHAR, age BIGINT)', {"name": "John", "age": 34}),
    (f"{NESTED}.a AS v FROM d", "bigquery", '{"a": [{"b": 1, "c": true}]}',
     'STRUCT(b BIGINT, c BOOLEAN)[]', [{"b": 1, "c": True}]),
    (f"{NESTED} AS v FROM d", "bigquery", None,
     "STRUCT(a STRUCT(b BIGINT, c BOOLEAN)[], full_response JSON, status VARCHAR)",
     {"a": None, "full_response": None, **NO_ANSWER}),
    (f"{PERSON} AS v FROM d", "bigquery", '{"s": {"name": "Al", "age": 99999999999999999999}}',
     'STRUCT(s STRUCT("name" VARCHAR, age BIGINT), full_response JSON, status VARCHAR)',
     {"s": None, "full_response": '{"s": {"name": "Al", "age": 99999999999999999999}}',
      "status": 's: the answer {"name":"Al","age":99999999999999999999} is not a valid '
                'STRUCT<name STRING, age INT64>'}),
    ("SELECT AI.GENERATE(t, output_schema => 'name STRING, n INT64').name AS v FROM d",
     "bigquery", '{"name": "Ann", "n": null}', "VARCHAR", "Ann"),
    ("SELECT AI.GENERATE(t, output_schema => 'name STRING, n INT64').status AS v FROM d",
     "bigquery", '{"name": "Ann", "n": null}', "VARCHAR", ""),  # null: the text does not say
    # Databricks returnType: the type itself, explode / size / .field on it
    ("SELECT explode(ai_query('ep', t, returnType => 'ARRAY<STRING>')) AS v FROM d LIMIT 1",
     "databricks", '["red", "blue"]', "VARCHAR", "red"),
    ("SELECT size(ai_query('ep', t, returnType => 'ARRAY<STRING>')) AS v FROM d", "databricks",
     '["red", "blue"]', "BIGINT", 2),
    ("SELECT ai_query('ep', t, returnType => 'STRUCT<name: STRING, age: INT>').name AS v FROM d",
     "databricks", '{"name": "John", "age": 34}', "VARCHAR", "John"),
    ("SELECT ai_query('ep', t, returnType => 'DATE') AS v FROM d", "databricks",
     '"2024-02-03"', "DATE", datetime.date(2024, 2, 3)),
    ("SELECT ai_query('ep', t, returnType => 'TIMESTAMP_NTZ') AS v FROM d", "databricks",
     '"2024-02-03 04:05:06"', "TIMESTAMP", datetime.datetime(2024, 2, 3, 4, 5, 6)),
    ("SELECT ai_query('ep', t, returnType => 'DATE') AS v FROM d", "databricks",
     '"2024-02-30"', "DATE", None),
    ("SELECT ai_query('ep', t, returnType => 'DATE', failOnError => false) AS v FROM d",
     "databricks", '"2024-02-30"', "STRUCT(result DATE, errorMessage VARCHAR)",
     {"result": None, "errorMessage": 'the answer "2024-02-30" is not a valid DATE'}),
    ("SELECT ai_query('ep', t, returnType => 'ARRAY<INT>', failOnError => false) AS v FROM d",
     "databricks", None, "STRUCT(result BIGINT[], errorMessage VARCHAR)",
     {"result": None, "errorMessage": shapes.no_answer_text("databricks")}),
    ("SELECT ai_query('ep', t, returnType => 'ARRAY<INT>', failOnError => false) AS v FROM d",
     "databricks", "[1, 2]", "STRUCT(result BIGINT[], errorMessage VARCHAR)",
     {"result": [1, 2], "errorMessage": None}),
    # Snowflake's response_format answers the JSON text, as Cortex does
    ("SELECT AI_COMPLETE('m', t, response_format => TYPE OBJECT(d DATE)) AS v FROM d",
     "snowflake", '{"d": "2024-02-03"}', "VARCHAR", '{"d": "2024-02-03"}'),
])
def test_a_typed_answer_lands_as_the_vendors_type(sql, dialect, answer, sql_type, value):
    assert run_typed(sql, dialect, answer) == (sql_type, value)


@pytest.mark.parametrize("sql,dialect,pattern", [
    ("SELECT ai_query('ep', t, returnType => 'DATE') FROM d", "databricks", "2024-02-03"),
    ("SELECT ai_query('ep', t, returnType => 'TIMESTAMP') FROM d", "databricks",
     "2024-02-03T04:05:06.5+01:00"),
    ("SELECT AI_COMPLETE('m', t, response_format => TYPE OBJECT(ts TIMESTAMP)) FROM d",
     "snowflake", "2024-02-03 04:05:06"),
])
def test_a_date_or_time_is_decoded_as_a_string_of_its_iso_form(sql, dialect, pattern):
    import re

    schema = schema_of(sql, dialect)
    leaf = schema["properties"]["ts"] if "properties" in schema else schema
    assert leaf["type"] == "string" and re.fullmatch(leaf["pattern"][1:-1], pattern)
    assert not re.fullmatch(leaf["pattern"][1:-1], "next Tuesday")


@pytest.mark.parametrize("sql,dialect,words", [
    ("SELECT ai_query('ep', t, returnType => 'MAP<STRING, INT>') FROM d", "databricks",
     "AI_QUERY: the type MAP"),
    ("SELECT ai_query('ep', t, returnType => 'STRUCT<a: INTERVAL DAY>') FROM d", "databricks",
     "AI_QUERY: the type INTERVAL"),
    ("SELECT AI_COMPLETE('m', t, response_format => TYPE OBJECT(b BINARY)) FROM d", "snowflake",
     "AI_COMPLETE: the type BINARY"),
])
def test_a_type_with_no_json_form_is_refused_naming_the_function(sql, dialect, words):
    with pytest.raises(ArgumentError, match=words) as info:
        parse(sql, dialect)
    assert "has no JSON counterpart" in str(info.value) and info.value.fragment
