"""Prefix sharing across rows on the real default model (float32, CPU): rows that begin alike
(cumulative agent-trace snapshots) compute their common beginning once, every answer equals
the answer without sharing, and a query's report shows per operator the KV hits, the fresh
tokens and the minimum (each beginning once)."""

from __future__ import annotations

import random

import duckdb
import pytest

from quail_engine.infer.api import BooleanReadout, LabelReadout, Request
from quail_engine.infer.radix import PrefixCounter, common_prefix_length

pytestmark = pytest.mark.model
SQL = ("SELECT id FROM traces WHERE ai_filter(PROMPT('Did the agent run the tests? {0}', "
       "snapshot)) ORDER BY id")
WORDS = ("the agent called the search tool read the config file then wrote a patch ran the "
         "failing test and saw it pass before opening a pull request").split()


@pytest.fixture(scope="module")
def engines(require_embedded):
    from quail_engine.infer.engine import LocalEngine

    require_embedded("default")
    shared = LocalEngine.load("default", "cpu", "float32", token_budget=512,
                              prefix_sharing=True)
    plain = LocalEngine(shared.model, shared.codec.tokenizer, shared.config,
                        model_id=shared.model_id, token_budget=512, prefix_sharing=False)
    return shared, plain


def _snapshots(num_traces: int, per_trace: int, seed: int = 0) -> list[str]:
    """Each trace's snapshot k is snapshot k-1 plus a turn (what an agent-trace table holds)."""
    rng = random.Random(seed)
    docs = []
    for t in range(num_traces):
        text = f"Trace {t}."
        for _ in range(per_trace):
            text += " " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 24)))
            docs.append(text)
    rng.shuffle(docs)
    return docs


def _requests(engine, docs, question, readout):
    out = []
    for doc in docs:
        head, tail = engine.chat_split(f"Text:\n{doc}\n\n", f"Question: {question}")
        out.append(Request(tuple(head + tail), readout))
    return out


def test_answers_with_sharing_equal_answers_without(engines):
    shared, plain = engines
    docs = _snapshots(2, 4)
    requests = (_requests(shared, docs, "did the agent fix the test?", BooleanReadout())
                + _requests(shared, docs[:4], "what did the agent do?",
                            LabelReadout(("search", "patch", "test"))))
    fresh0, hits0 = shared.stats.fresh_tokens, shared.stats.kv_hit_tokens
    got, want = shared.run(requests), plain.run(requests)
    for g, w in zip(got, want):
        assert g.value == w.value
        assert abs(g.score - w.score) < 1e-4
    own = sum(len(r.tokens) for r in requests)
    fresh, hits = shared.stats.fresh_tokens - fresh0, shared.stats.kv_hit_tokens - hits0
    assert fresh < 0.6 * own and hits > 0.5 * own


def test_a_prefix_added_over_cached_pages_answers_like_one_computed_whole(engines):
    """A document prefix (the planner's, retained across predicates) that begins with pages
    another row computed is a chain of those pages plus its own; partners over it answer as
    over the same prefix computed from scratch, and the cached pages survive its release."""
    shared, plain = engines
    docs = sorted(_snapshots(1, 3, seed=1), key=len)
    shared.run(_requests(shared, docs, "did the agent fix the test?", BooleanReadout()))
    head = shared.chat_split(f"Text:\n{docs[2]}\n\n", "")[0]
    before = shared.chat_split(f"Text:\n{docs[1]}\n\n", "")[0]
    cached = common_prefix_length(head, before) // 16 * 16  # the rows' shared pages
    fresh0, hits0 = shared.stats.fresh_tokens, shared.stats.kv_hit_tokens
    handles = {e: e.add_prefix(head) for e in (shared, plain)}
    assert shared.stats.kv_hit_tokens - hits0 >= cached > 0
    assert shared.stats.fresh_tokens - fresh0 <= len(head) - cached
    tails = [shared.chat_split("", f"Question: {q}")[1] for q in ("is it done?", "a test?")]
    answers = {e: e.run([Request(tuple(t), BooleanReadout(), handles[e]) for t in tails])
               for e in handles}
    for g, w in zip(answers[shared], answers[plain]):
        assert g.value == w.value and abs(g.margin - w.margin) < 1e-4
    for e, h in handles.items():
        e.release(h)
    assert shared.prefix_cache.index.match(head)  # content pages stay cached, unpinned


def _traces(con, num_traces: int = 2, per_trace: int = 4) -> None:
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


def test_sharing_keeps_rows_and_reports_hits_fresh_and_minimum(engines):
    from quail_engine.exec.session import QuailSession

    con = duckdb.connect()
    _traces(con)
    out = {}
    for name, engine in zip(("shared", "plain"), engines):
        session = QuailSession(con.cursor(), lambda e=engine: e)
        rows = [r["id"] for r in session.execute(SQL, "duckdb").to_pylist()]
        out[name] = rows, session.report.to_json()
    (rows_on, on), (rows_off, off) = out["shared"], out["plain"]
    assert rows_on == rows_off
    op_on, op_off = on["operators"][0], off["operators"][0]
    # the minimum is exact within a batch and at most grain - 1 tokens over per row across
    # batches (infer/radix.PrefixCounter); the two engines batch differently (rows that
    # extend the row before cost only their new tokens where the engine shares prefixes)
    grain = PrefixCounter().grain
    assert op_off["minimum_tokens"] > 0
    assert abs(op_on["minimum_tokens"] - op_off["minimum_tokens"]) <= (grain - 1) * op_off["rows_in"]
    assert op_on["kv_hit_tokens"] > 0 and op_off["kv_hit_tokens"] == 0
    assert op_on["fresh_tokens"] < op_off["fresh_tokens"]
    assert op_off["minimum_tokens"] < op_off["fresh_tokens"]  # rows share their beginnings
    assert 0.0 <= op_on["kv_regret"] < op_off["kv_regret"]
    assert on["minimum_tokens"] == op_on["minimum_tokens"]
