"""AI_AGG over groups larger than the context, on the embedded models: each group is answered
by map-reduce (exec/aggregate.py) instead of one prompt cut to fit."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from quail_engine.exec.facade import SessionConfig, open_session

REVIEWS = Path(__file__).resolve().parents[2] / "examples" / "data" / "reviews.csv"


@pytest.mark.model
def test_groups_past_the_context_are_summarized_by_map_reduce(require_embedded):
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    import duckdb

    with open(REVIEWS, newline="") as f:
        texts = [r["review"] for r in csv.DictReader(f)][:16]
    con = duckdb.connect()
    con.execute("CREATE TABLE docs (id INTEGER, body VARCHAR, grp VARCHAR)")
    con.executemany("INSERT INTO docs VALUES (?, ?, ?)",
                    [(i, t, "ab"[i % 2]) for i, t in enumerate(texts)])
    # each group's eight reviews are several times what a prompt may hold here
    session = open_session(con, SessionConfig(use_cache=False, precision="fp32",
                                              max_context=128, max_new_tokens=16))
    table = session.execute("SELECT grp, AI_AGG(body, 'Name the common topic') AS topic "
                            "FROM docs GROUP BY grp ORDER BY grp", "snowflake")
    topics = table.column("topic").to_pylist()
    assert table.column("grp").to_pylist() == ["a", "b"]
    assert all(isinstance(t, str) and t.strip() for t in topics), topics
    (op,) = session.report.ops.values()
    # chunks of each group, then the groups from their chunks' answers; no prompt was cut
    assert op.prompts > 4 and op.truncated == 0, (op.prompts, op.truncated)
    # the report counts the map rounds and their chunks among the prompts (the rest: the two
    # groups' final prompts)
    assert op.map_rounds >= 1 and op.map_chunks + 2 == op.prompts, (op.map_rounds, op.prompts)
    assert f"{op.map_chunks} map chunks in {op.map_rounds} round" in session.report.text()


@pytest.mark.model
def test_ai_agg_over_a_window_gives_each_row_its_partitions_answer(require_embedded):
    """AI_AGG(x) OVER (PARTITION BY g): the call applies to each row's `list(x) OVER (...)`,
    so every row gets its partition's answer (before: DuckDB's 'AI_AGG is not an aggregate
    function' at run time)."""
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE docs (id INTEGER, body VARCHAR, grp VARCHAR)")
    con.executemany("INSERT INTO docs VALUES (?, ?, ?)",
                    [(1, "great shoes", "a"), (2, "bad laces", "a"), (3, "nice tent", "b")])
    session = open_session(con, SessionConfig(use_cache=False, precision="fp32",
                                              max_new_tokens=12))
    rows = session.execute("SELECT id, grp, AI_AGG(body, 'Name the common topic') OVER "
                           "(PARTITION BY grp) AS t FROM docs ORDER BY id", "snowflake").to_pylist()
    assert [r["id"] for r in rows] == [1, 2, 3]
    assert all(isinstance(r["t"], str) and r["t"].strip() for r in rows), rows
    assert rows[0]["t"] == rows[1]["t"]  # one partition, one answer


@pytest.mark.model
def test_map_chunks_are_the_plans_size_not_the_whole_context(require_embedded, monkeypatch):
    """Each group past the context is cut into map chunks of the plan's aggregate step
    (plan/chunking.map_chunk_tokens for the writing model at the session's answer cap, smaller
    than this context), so it asks more prompts than chunks that fill the context would, and
    cuts none; the report carries the step's estimates."""
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    import duckdb

    from quail_engine.plan import physical

    with open(REVIEWS, newline="") as f:
        texts = [r["review"] for r in csv.DictReader(f)] * 4
    con = duckdb.connect()
    con.execute("CREATE TABLE docs (id INTEGER, body VARCHAR, grp VARCHAR)")
    con.executemany("INSERT INTO docs VALUES (?, ?, ?)",
                    [(i, t, "ab"[i % 2]) for i, t in enumerate(texts)])
    sql = ("SELECT grp, AI_AGG(body, 'Name the common topic') AS topic FROM docs GROUP BY grp "
           "ORDER BY grp")
    planned = physical.map_chunk_tokens
    calls = []

    def recorded(model, answer, overhead, context):
        calls.append(((model.num_layers, model.hidden_size), answer, planned(model, answer, overhead, context)))
        return calls[-1][-1]

    prompts = {}
    for name, chunk in (("planned", recorded), ("whole context", lambda *args: args[-1])):
        monkeypatch.setattr(physical, "map_chunk_tokens", chunk)
        session = open_session(con, SessionConfig(use_cache=False, precision="fp32",
                                                  max_context=1024, max_new_tokens=16))
        topics = session.execute(sql, "snowflake").column("topic").to_pylist()
        assert all(isinstance(t, str) and t.strip() for t in topics), (name, topics)
        (op,) = session.report.ops.values()
        assert op.truncated == 0
        assert op.est_tokens and op.est_tokens > 0 and op.selectivity_est is None
        prompts[name] = op.prompts
    # planned once, for the writer (SmolLM2-135M's 30 layers of 576 write the generated text,
    # not Gemma-3-270m's 18 of 640) at the session's 16 tokens
    (shape, answer, chunk), = calls
    assert shape == (30, 576) and answer == 16, calls
    assert chunk < 1024 - 16, calls
    assert prompts["planned"] > prompts["whole context"], prompts


@pytest.mark.model
def test_explain_sizes_the_map_chunk_for_the_writer_too(require_embedded, monkeypatch):
    """`quail explain` plans the aggregate as the run does: for the generation model's shape
    (its config read, no weights) at the session's answer cap."""
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    import duckdb

    from quail_engine.exec.facade import estimated_plans
    from quail_engine.plan import physical
    from quail_engine.sql.query import parse

    con = duckdb.connect()
    con.execute(f"CREATE VIEW docs AS SELECT * FROM read_csv_auto('{REVIEWS}')")
    calls = []
    planned = physical.map_chunk_tokens

    def recorded(model, answer, overhead, context):
        calls.append(((model.num_layers, model.hidden_size), answer))
        return planned(model, answer, overhead, context)

    monkeypatch.setattr(physical, "map_chunk_tokens", recorded)
    sql = "SELECT product_id, AI_AGG(review, 'Name the topic') AS t FROM docs GROUP BY product_id"
    estimated_plans(con, parse(sql, "snowflake"), SessionConfig(max_new_tokens=16))
    assert calls == [((30, 576), 16)], calls
