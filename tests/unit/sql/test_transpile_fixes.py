"""Transpile: a field of a rebuilt vendor struct read as the field's own expression; a model
name carried across warehouses is warned about; each distinct warning is logged once per
transpile; a read-back refusal names operator kinds, not enum reprs."""

import logging
import sys

import pytest

from quail_engine.errors import UnsupportedError
from quail_engine.sql import parse, transpile


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# the status of a BigQuery result names BigQuery's option, whichever warehouse it is written in
NO_ANSWER = ("'no answer: a NULL input, or the model did not complete an answer of the "
             "requested type within max_output_tokens'")


@pytest.mark.parametrize(("write", "sql", "expected"), [
    ("snowflake", "SELECT AI.GENERATE(body, output_schema => 'a STRING, n INT64').a FROM t",
     "SELECT JSON_EXTRACT_PATH_TEXT(AI_EXTRACT(body, ['a', 'n']):response, 'a') FROM t"),
    ("snowflake", "SELECT AI.GENERATE_BOOL(body).status FROM t",
     f"SELECT COALESCE(CASE WHEN AI_FILTER(body) IS NULL THEN {NO_ANSWER} END, '') FROM t"),
    ("databricks", "SELECT AI.GENERATE_BOOL(body).status FROM t",
     "SELECT COALESCE(CASE WHEN (ai_classify(body, ARRAY('yes', 'no')) = 'yes') IS NULL THEN "
     f"{NO_ANSWER} END, '') FROM t"),
])
def test_a_field_of_a_rebuilt_struct_is_that_fields_expression(write, sql, expected):
    """`.a` of the rebuilt struct is the field's own expression, one call: the whole struct
    (an OBJECT in Snowflake) named the call once per field and again in its status."""
    out = transpile(sql, "bigquery", write)
    assert out == expected
    assert len(parse(out, write).ai_ops) == 1


@pytest.mark.parametrize(("read", "write", "sql", "model"), [
    ("snowflake", "bigquery", "SELECT AI_COMPLETE('llama3.1-8b', body) FROM t", "llama3.1-8b"),
    ("databricks", "snowflake", "SELECT ai_query('databricks-meta-llama-3-3-70b', body) FROM t",
     "databricks-meta-llama-3-3-70b"),
    ("bigquery", "databricks", "SELECT AI.GENERATE(body, endpoint => 'gemini-2.5-flash').result "
     "FROM t", "gemini-2.5-flash"),
])
def test_a_model_name_carried_across_warehouses_is_warned_about(read, write, sql, model, caplog):
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.transpile"):
        out = transpile(sql, read, write)
    assert model in out
    assert [w for w in _warnings(caplog) if f"the model {model!r}" in w
            and f"is a {read} name" in w], _warnings(caplog)


@pytest.mark.parametrize("write", ["snowflake", "duckdb"])
def test_no_model_warning_within_one_warehouse_or_to_duckdb(write, caplog):
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.transpile"):
        transpile("SELECT AI_COMPLETE('llama3.1-8b', body) FROM t", "snowflake", write,
                  keep_source=False)
    assert not [w for w in _warnings(caplog) if "the model" in w]


def test_each_warning_once_per_transpile(caplog):
    sql = ("WITH c AS (SELECT AI.GENERATE(body).result AS a FROM t) SELECT * FROM c "
           "UNION ALL SELECT AI.GENERATE(body).result FROM t")
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.transpile"):
        out = transpile(sql, "bigquery", "snowflake")
        transpile(sql, "bigquery", "snowflake")
    assert out.count("AI_COMPLETE('llama3.1-8b', body)") == 2
    needs = [w for w in _warnings(caplog) if "needs a model" in w]
    assert len(needs) == 2, needs  # once per transpile, two transpiles


def test_read_back_refusal_names_kinds_not_enums(monkeypatch):
    monkeypatch.setattr(sys.modules["quail_engine.sql.transpiler"], "emit_op",
                        lambda op, args, write: "AI.GENERATE(review).result")
    with pytest.raises(UnsupportedError) as info:
        transpile("SELECT AI_FILTER(review) FROM t", "snowflake", "bigquery")
    message = str(info.value)
    assert "reads back as ai_generate, not ai_filter" in message, message
    assert "OpKind" not in message
