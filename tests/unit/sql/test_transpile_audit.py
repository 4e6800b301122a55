"""Transpile faults a user audit found: each rewritten statement asks the model as often as
the source does and is spelled as the target vendor documents it."""

from quail_engine.sql import parse, transpile

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
