"""An option refused for its value is named as the user wrote it, not by quail's IR name: the
messages said `option instruction` for Snowflake's task_description and Databricks'
instructions, `option model` for BigQuery's and Databricks' endpoint, `option max_tokens` for
BigQuery's max_output_tokens."""

from __future__ import annotations

import pytest

from quail_engine.sql import parse
from quail_engine.sql.errors import ArgumentError

CASES = [
    # (dialect, SQL, the option as the message must name it, an IR name it must not use)
    ("snowflake", "SELECT AI_CLASSIFY(b, ['a', 'b'], {'task_description': ''}) FROM t",
     "option task_description", "instruction"),
    ("snowflake", "SELECT SNOWFLAKE.CORTEX.CLASSIFY_TEXT(b, ['a', 'b'], "
                  "{'task_description': 3}) FROM t", "option task_description", "instruction"),
    ("databricks", "SELECT ai_classify(b, '[\"a\", \"b\"]', map('instructions', '')) FROM t",
     "option instructions", "option instruction "),
    ("databricks", "SELECT ai_query('', b) FROM t", "option endpoint", "model"),
    ("bigquery", "SELECT AI.IF(b, endpoint => '') FROM t", "option endpoint", "model"),
    ("bigquery", "SELECT AI.GENERATE(b, model_params => JSON '{\"generation_config\": "
                 "{\"max_output_tokens\": 0}}').result FROM t",
     "option max_output_tokens", "max_tokens"),
    ("bigquery", "SELECT AI.GENERATE(b, model_params => JSON '{\"generationConfig\": "
                 "{\"topP\": 7}}').result FROM t", "option topP", "top_p"),
    ("bigquery", "SELECT AI.GENERATE(b, model_params => JSON '{\"generation_config\": "
                 "{\"stop_sequences\": [1]}}').result FROM t", "option stop_sequences",
     "option stop "),
    ("bigquery", "SELECT * FROM AI.GENERATE_TABLE(MODEL `m`, TABLE t, STRUCT('a STRING' AS "
                 "output_schema, 0 AS max_output_tokens))", "option max_output_tokens",
     "max_tokens"),
    ("snowflake", "SELECT AI_COMPLETE('m', b, {'MAX_TOKENS': 0}) FROM t", "option MAX_TOKENS",
     "max_tokens"),
    # where the user's name is quail's, it stays
    ("databricks", "SELECT ai_query('e', b, modelParameters => named_struct('max_tokens', 0)) "
                   "FROM t", "option max_tokens", None),
    ("duckdb", "SELECT ai_classify(b, ['a', 'b'], instruction := '') FROM t",
     "option instruction", None),
]


@pytest.mark.parametrize("dialect,sql,named,internal", CASES, ids=[c[2] for c in CASES])
def test_a_refused_option_is_named_as_written(dialect, sql, named, internal):
    with pytest.raises(ArgumentError) as info:
        parse(sql, dialect)
    head = str(info.value).split(" [")[0]  # the message, not the quoted SQL
    assert named in head
    assert internal is None or internal not in head
