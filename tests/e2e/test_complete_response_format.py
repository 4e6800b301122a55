"""SNOWFLAKE.CORTEX.COMPLETE with `{'response_format': ...}` in its options, run through a
real session on the embedded models (CPU): the answer is decoded under the JSON schema and
packaged as Snowflake packages a structured COMPLETE
(https://docs.snowflake.com/en/user-guide/snowflake-cortex/complete-structured-outputs):
`structured_output[0].raw_message` the object, beside created, model and usage."""

from __future__ import annotations

import json

import pytest

from quail_engine.errors import ExecutionError
from quail_engine.exec.facade import SessionConfig, open_session

pytestmark = pytest.mark.model

REVIEWS = [(1, "great shoes, they fit perfectly"), (2, "the soles fell off after a week")]
SENTIMENTS = ["positive", "negative"]
FORMAT = ("{'type': 'json', 'schema': {'type': 'object', 'properties': {'sentiment': "
          "{'type': 'string', 'enum': ['positive', 'negative']}}, 'required': ['sentiment']}}")


@pytest.fixture(scope="module")
def session(require_embedded):
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE reviews (id INTEGER, body VARCHAR)")
    con.executemany("INSERT INTO reviews VALUES (?, ?)", REVIEWS)
    return open_session(con, SessionConfig(use_cache=False, precision="fp32"))


@pytest.mark.parametrize("fn", ["COMPLETE", "TRY_COMPLETE"])
def test_the_answer_matches_the_schema_inside_snowflakes_object(session, fn):
    sql = (f"SELECT id, SNOWFLAKE.CORTEX.{fn}('llama3.1-8b', [{{'role': 'user', 'content': "
           f"'Review: ' || body || ' Give its sentiment.'}}], {{'temperature': 0, "
           f"'response_format': {FORMAT}}}) AS r FROM reviews ORDER BY id")
    values = session.execute(sql, "snowflake").column("r").to_pylist()
    assert len(values) == len(REVIEWS)
    for v in values:
        obj = json.loads(v)
        assert set(obj) == {"created", "model", "structured_output", "usage"}, obj
        (out,) = obj["structured_output"]
        assert out["type"] == "json" and set(out["raw_message"]) == {"sentiment"}, obj
        assert out["raw_message"]["sentiment"] in SENTIMENTS, obj


def test_ai_completes_show_details_packages_a_format_the_same_way(session):
    sql = (f"SELECT AI_COMPLETE(model => 'llama3.1-8b', prompt => 'Review: ' || body, "
           f"response_format => {FORMAT}, show_details => TRUE) AS r FROM reviews")
    for v in session.execute(sql, "snowflake").column("r").to_pylist():
        obj = json.loads(v)
        assert obj["structured_output"][0]["raw_message"]["sentiment"] in SENTIMENTS, obj


def test_a_format_the_grammar_cannot_take_fails_quoting_it(session):
    sql = ("SELECT SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': 'user', 'content': body}], "
           "{'response_format': {'type': 'json', 'schema': {'type': 'bogus'}}}) AS r "
           "FROM reviews")
    with pytest.raises(ExecutionError, match=r'cannot be decoded under a grammar.*"type": "bogus"'):
        session.execute(sql, "snowflake")
