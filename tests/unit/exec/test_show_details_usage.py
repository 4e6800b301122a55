"""Snowflake's show_details object through a session: created (the statement's time), the
model that wrote the answer, usage from the prompt's and the answer's token counts; a NULL or
blank input is NULL, not an object around no answer."""

from __future__ import annotations

import json
import time

import duckdb
from exec_fakes import FakeEngine

from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec

TOY = DeviceSpec("toy", 1e11, 2e10)
REVIEW = "great price and a fair price"


def _run(sql: str, dialect: str) -> list:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, review VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(1, REVIEW), (2, None), (3, "  ")])
    session = QuailSession(con, FakeEngine, device_spec=TOY)
    return session.execute(sql, dialect).column("d").to_pylist()


def test_show_details_object_reports_model_tokens_and_time():
    before = int(time.time())
    values = _run("SELECT id, AI_COMPLETE('llama3.1-8b', review, show_details => TRUE) AS d "
                  "FROM t ORDER BY id", "snowflake")
    after = int(time.time())
    assert values[1:] == [None, None]
    obj = json.loads(values[0])
    fake = FakeEngine()
    head, tail = fake.chat_split(REVIEW, "")  # the fake reads the review as its whole prompt
    answer = obj["choices"][0]["messages"]
    assert answer == "about great"
    assert obj["model"] == "fake"  # the model quail ran, not the vendor's 'llama3.1-8b'
    assert before <= obj["created"] <= after
    assert obj["usage"] == {"prompt_tokens": len(head) + len(tail),
                            "completion_tokens": len(fake.tokenize([answer])[0]),
                            "total_tokens": len(head) + len(tail) + 2}


def test_duckdb_show_details_and_a_path_into_it():
    values = _run("SELECT id, ai_generate(review, show_details := true)->>'$.model' AS d "
                  "FROM t ORDER BY id", "duckdb")
    assert values == ["fake", None, None]
