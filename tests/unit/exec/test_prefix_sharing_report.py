"""A query over rows that begin alike (cumulative agent-trace snapshots) on the embedded model:
with prefix sharing the rows answer as without it, run fewer fresh tokens, and the report
shows per operator the KV hits, the fresh tokens and the minimum (each beginning once)."""

from __future__ import annotations

import random

import duckdb
import pytest

pytestmark = pytest.mark.model
SQL = ("SELECT id FROM traces WHERE ai_filter(PROMPT('Did the agent run the tests? {0}', "
       "snapshot)) ORDER BY id")


def _traces(con, num_traces: int = 2, per_trace: int = 5) -> None:
    rng = random.Random(7)
    words = "agent tool read file wrote patch ran tests failed passed opened request".split()
    rows = []
    for t in range(num_traces):
        text = f"Trace {t} of a coding agent."
        for k in range(per_trace):
            text += f" Turn {k}: " + " ".join(rng.choice(words) for _ in range(rng.randint(5, 15)))
            rows.append((len(rows), text))
    con.execute("CREATE TABLE traces (id INTEGER, snapshot VARCHAR)")
    con.executemany("INSERT INTO traces VALUES (?, ?)", rows)


@pytest.fixture(scope="module")
def engines(require_embedded):
    from quail_engine.infer.engine import LocalEngine

    require_embedded("default")
    shared = LocalEngine.load("default", "cpu", "float32", prefix_sharing=True)
    plain = LocalEngine(shared.model, shared.codec.tokenizer, shared.config,
                        model_id=shared.model_id, prefix_sharing=False)
    return shared, plain


def test_sharing_keeps_rows_and_reports_hits_fresh_and_minimum(engines):
    from quail_engine.exec.session import QuailSession

    con = duckdb.connect()
    _traces(con)
    out = {}
    for name, engine in zip(("shared", "plain"), engines):
        session = QuailSession(con.cursor(), lambda e=engine: e, use_cache=False)
        rows = [r["id"] for r in session.execute(SQL, "duckdb").to_pylist()]
        out[name] = rows, session.report.to_json()
    (rows_on, on), (rows_off, off) = out["shared"], out["plain"]
    assert rows_on == rows_off
    op_on, op_off = on["operators"][0], off["operators"][0]
    assert op_on["minimum_tokens"] == op_off["minimum_tokens"] > 0
    assert op_on["kv_hit_tokens"] > 0 and op_off["kv_hit_tokens"] == 0
    assert op_on["fresh_tokens"] < op_off["fresh_tokens"]
    assert op_off["minimum_tokens"] < op_off["fresh_tokens"]  # rows share their beginnings
    assert 0.0 <= op_on["kv_regret"] < op_off["kv_regret"]
    assert on["minimum_tokens"] == op_on["minimum_tokens"]
