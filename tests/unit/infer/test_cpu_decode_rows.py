"""On a CPU (unbounded KV) a generating batch holds many answers, so each decode step serves
them all: a batch sized by its prompts' tokens alone held one answer, and every step read all the
weights for that one. Through a session on the embedded writer (real weights, float32): the rows
of one AI_COMPLETE decode in one batch, and write the texts each row writes alone."""

from __future__ import annotations

import duckdb
import pytest

from quail_engine.infer.engine_generation import CPU_DECODE_KV_BYTES, CPU_DECODE_ROWS

pytestmark = pytest.mark.model

SENTENCES = ("The lamp arrived broken and support never answered my three emails about it.",
             "Great blender, quiet and strong, though the lid is hard to clean after soups.",
             "Shipping took three weeks and the box was soaked when it finally arrived.",
             "The shoes fit well but the color faded after two washes in cold water.",
             "Five stars, would buy again; my kids use it every day and it still works.")
# (long rows: a batch sized by its prompts' tokens alone holds one or two of them on a CPU)
REVIEWS = [f"Review {n}. " + " ".join(SENTENCES[(n + k) % 5] for k in range(12))
           for n in range(8)]


@pytest.fixture(scope="module")
def engine(require_embedded):
    require_embedded("smollm2-135m")
    import torch

    from quail_engine.infer.engine import LocalEngine

    return LocalEngine.load("smollm2-135m", dtype=torch.float32)


def test_answers_per_batch_from_the_kv_they_need(engine):
    c = engine.config
    per_token = 2 * 4 * c.num_layers * c.num_kv_heads * c.head_dim
    assert engine.decode_rows(300, 48) == CPU_DECODE_ROWS
    long = 4000
    assert engine.decode_rows(long, 256) == CPU_DECODE_KV_BYTES // (per_token * (long + 256))
    assert 1 < engine.decode_rows(long, 256) < CPU_DECODE_ROWS
    assert engine.decode_rows(10 ** 6, 256) == 1  # (never none)


def test_a_call_decodes_in_one_batch_and_each_row_as_alone(engine):
    from quail_engine.exec.session import QuailSession
    from quail_engine.infer.api import GenerateReadout, Request
    from quail_engine.plan.cost import DeviceSpec

    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, review VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(REVIEWS)))
    session = QuailSession(con, lambda: engine, device_spec=DeviceSpec("toy cpu", 1e11, 2e10))
    sql = ("SELECT id, AI_COMPLETE('m', PROMPT('Reply in five words: {0}', review), "
           "{'max_tokens': 6}) AS s FROM t ORDER BY id")
    got = session.execute(sql, "snowflake").column("s").to_pylist()
    assert len(session.report.timeline.batches) == 1
    alone = []
    for review in REVIEWS:
        head, tail = engine.chat_split(f"Reply in five words: {review}", "")
        answer = engine.run([Request(tuple(head + tail), GenerateReadout(max_tokens=6))])[0]
        alone.append(answer.value.strip())
    assert got == alone
