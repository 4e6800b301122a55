"""Transpile: fields of a rebuilt Snowflake OBJECT read with brackets, not `.field`; a model
name carried across warehouses is warned about; each distinct warning is logged once per
transpile; a read-back refusal names operator kinds, not enum reprs."""

import logging
import sys

import pytest

from quail_engine.errors import UnsupportedError
from quail_engine.sql import parse, transpile


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize(("sql", "field"), [
    ("SELECT AI.GENERATE(body, output_schema => 'a STRING, n INT64').a FROM t", "['a']"),
    ("SELECT AI.GENERATE_BOOL(body).status FROM t", "['status']"),
])
def test_struct_fields_become_object_fields_in_snowflake(sql, field):
    out = transpile(sql, "bigquery", "snowflake")
    assert out.endswith(f"){field} FROM t"), out
    assert ").a FROM" not in out and ").status FROM" not in out
    assert len(parse(out, "snowflake").ai_ops) == 1


def test_struct_fields_stay_dotted_where_the_shape_is_a_struct():
    out = transpile("SELECT AI.GENERATE_BOOL(body).status FROM t", "bigquery", "databricks")
    assert out.endswith(")[0].status FROM t"), out  # the struct the call's value is bound in


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
    monkeypatch.setattr(sys.modules["quail_engine.sql.transpile"], "emit_op",
                        lambda op, args, write: "AI.GENERATE(review).result")
    with pytest.raises(UnsupportedError) as info:
        transpile("SELECT AI_FILTER(review) FROM t", "snowflake", "bigquery")
    message = str(info.value)
    assert "reads back as ai_generate, not ai_filter" in message, message
    assert "OpKind" not in message
