"""Each vendor's structured-output form read as the JSON schema the decoder enforces."""

import json

import pytest

from quail_engine.sql import parse
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
