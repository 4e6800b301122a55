"""The report's timeline (what `explain --analyze --plot` draws) agrees with the report: every
operator's calls, prompts and cache hits, every fresh token in an engine batch, times inside the
run; a cached rerun shows its calls with no engine batch."""

import json

import pytest
from exec_fakes import FakeEngine, bfilter, classify, filters_query, review_db

from quail_engine.exec.config import SessionConfig
from quail_engine.exec.session import QuailSession
from quail_engine.exec.timeline import MAX_EVENTS, Timeline
from quail_engine.plan.cost import DeviceSpec

REVIEWS = [(1, "great price and good battery", 1), (2, "bad battery died fast", 1),
           (3, "the price was too high", 2), (4, None, 2), (5, "price and battery", 3)]


@pytest.fixture
def con():
    return review_db(REVIEWS, [(1, "widget"), (2, "gadget"), (3, "battery")])


def run(con, tmp_path, engine):
    parsed = filters_query((bfilter("Mentions PRICE?"), bfilter("Mentions BATTERY?"),
                            classify()))
    s = QuailSession(con, lambda: engine,
                     SessionConfig(cache_dir=tmp_path, sample_size=0, device="cpu"),
                     device_spec=DeviceSpec(
        "toy", 1e11, 2e10))
    s.parse = lambda sql, dialect: parsed
    s.execute(parsed.duckdb_sql)
    return json.loads(s.report.dumps())


def test_timeline_accounts_for_every_operator_prompt_and_token(con, tmp_path):
    report = run(con, tmp_path, FakeEngine())
    timeline = report["timeline"]
    for op in report["operators"]:
        calls = [c for c in timeline["operators"] if c["op"] == op["op"]]
        assert calls and {c["kind"] for c in calls} == {op["kind"]}
        assert sum(c["prompts"] for c in calls) == op["prompts"]
        assert sum(c["cache_hits"] for c in calls) == op["cache_hits"] == 0
    batches = timeline["batches"]
    assert batches and sum(b["fresh_tokens"] for b in batches) == report["fresh_tokens"]
    assert sum(b["requested_tokens"] for b in batches) == report["requested_tokens"]
    assert all(b["kv_bytes"] is None for b in batches)  # the fake engine has no arena
    spans = [*timeline["phases"], *timeline["operators"], *batches]
    assert all(0 <= e["start"] <= e["end"] <= report["wall_s"] for e in spans)
    assert {"parse", "statement"} <= {p["name"] for p in timeline["phases"]}


def test_cached_rerun_shows_its_calls_all_from_cache_and_no_engine_batch(con, tmp_path):
    run(con, tmp_path, FakeEngine())
    again = run(con, tmp_path, FakeEngine())
    calls = again["timeline"]["operators"]
    assert calls and all(c["cache_hits"] == c["prompts"] for c in calls)
    assert again["timeline"]["batches"] == []


class _Arena:
    bytes_in_use, capacity_bytes = 3 * 2**20, None


class _Paged:
    num_pages, page_bytes = 10, 2**20


class _Model:
    arena = _Paged()


def test_kv_occupancy_reads_the_arena_and_the_paged_capacity():
    engine = FakeEngine()
    engine.arena, engine.model = _Arena(), _Model()
    engine.stats.prefixes_resident = 2
    t = Timeline()
    t.engine_batch(0, t.engine_mark(engine), engine)
    assert t.batches[0]["kv_bytes"] == 3 * 2**20
    assert t.batches[0]["kv_capacity_bytes"] == 10 * 2**20
    assert t.batches[0]["kv_prefixes"] == 2
    assert "pass_log" not in t.batches[0]  # an engine without a pass log (the CPU's)


def test_a_batch_lists_the_passes_the_gpu_engine_logged():
    engine = FakeEngine()
    logged = [[{"tokens": 7, "seqs": 1, "prefix_tokens": 0, "attention_pairs": 28,
                "gpu_s": 0.5}], []]
    engine.take_pass_log = lambda: logged.pop(0)
    t = Timeline()
    t.engine_batch(0, t.engine_mark(engine), engine)
    t.engine_batch(0, t.engine_mark(engine), engine)
    assert [b["pass_log"] for b in t.batches] == [[{"tokens": 7, "seqs": 1, "prefix_tokens": 0,
                                                   "attention_pairs": 28, "gpu_s": 0.5}], []]


def test_a_long_lived_timeline_stops_growing_and_counts_what_it_dropped():
    t = Timeline()
    for _ in range(MAX_EVENTS + 5):
        t.phase("statement", t.origin, t.origin)
    assert len(t.phases) == MAX_EVENTS and t.to_json()["dropped"] == 5
