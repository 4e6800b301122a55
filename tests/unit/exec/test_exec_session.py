"""The executor end to end with real DuckDB and a deterministic fake engine."""

import pytest
from exec_fakes import (
    FakeEngine,
    Parsed,
    ajoin,
    bfilter,
    classify,
    filters_query,
    generate,
    join_query,
    review_db,
)

from quail_engine.errors import ExecutionError
from quail_engine.exec.config import SessionConfig
from quail_engine.exec.prompts import OpPrompt
from quail_engine.exec.session import QuailSession
from quail_engine.exec.sql_values import sql_value
from quail_engine.infer.api import Request
from quail_engine.plan.cost import DeviceSpec

REVIEWS = [
    (1, "great price and good battery", 1), (2, "bad battery died fast", 1),
    (3, "the price was too high", 2), (4, "lovely colour positive vibes", 2),
    (5, "negative experience with the price", 3), (6, None, 3),
    (7, "my widget works, battery fine", 1), (8, "gadget broke, negative", 2),
    (9, "positive about price and battery", 3), (10, "nothing to say", 1),
]
PRODUCTS = [(1, "widget"), (2, "gadget"), (3, "battery")]
TOY = DeviceSpec("toy", 1e11, 2e10)


@pytest.fixture
def con():
    c = review_db(REVIEWS, PRODUCTS)
    c.execute("CREATE TABLE empty_reviews AS SELECT * FROM reviews WHERE false")
    return c


def session(con, parsed, engine, tmp_path=None, **kw):
    config = SessionConfig(device="cpu", cache_dir=tmp_path, use_cache=tmp_path is not None,
                           **kw)
    s = QuailSession(con, lambda: engine, config, device_spec=TOY)
    s.parse = lambda sql, dialect: parsed
    return s


def ask_one_at_a_time(engine, op, values):
    """The reference: one prompt per row, full tokens, no prefix, no plan."""
    if any(v is None for v in values):
        return None
    layout = OpPrompt.for_op(op)
    head, tail = engine.chat_split(*layout.texts(values))
    return sql_value(op, engine.run([Request(tuple(head + tail), layout.readout())])[0])


def reference_filters(engine, ops, where, project):
    out = []
    for rid, review, _ in REVIEWS:
        if all(ask_one_at_a_time(engine, ops[i], (review,)) is True for i in where):
            out.append((rid, *(ask_one_at_a_time(engine, ops[i], (review,)) for i in project)))
    return out


FILTER_CASES = [
    # (ops, where, project)
    ((bfilter("Mentions PRICE?"), bfilter("Mentions BATTERY?"), classify()), (0, 1), (2,)),
    ((bfilter("Mentions PRICE?", sel=0.9), bfilter("About BATTERY?", sel=0.1), generate()),
     (0, 1), (2,)),
    ((bfilter("Is it POSITIVE?"), classify()), (0,), (1,)),
    ((classify(),), (), (0,)),
]


@pytest.mark.parametrize("ops,where,project", FILTER_CASES)
def test_results_match_one_question_at_a_time(con, ops, where, project):
    engine = FakeEngine()
    parsed = filters_query(ops, where, project)
    got = session(con, parsed, engine).execute(parsed.duckdb_sql).to_pylist()
    expected = reference_filters(FakeEngine(), ops, where, project)
    assert [tuple(r.values()) for r in got] == expected
    assert engine.resident == 0  # every document KV released


def test_predicates_over_one_document_share_its_kv(con):
    ops = (bfilter("Mentions PRICE?"), bfilter("Mentions BATTERY?"), classify())
    parsed = filters_query(ops)
    planned, plain = FakeEngine(), FakeEngine()
    s1 = session(con, parsed, planned, sample_size=0)
    result = s1.execute(parsed.duckdb_sql)
    s2 = session(con, parsed, plain, plan=False, share_kv=False)
    assert s2.execute(parsed.duckdb_sql) == result
    non_null = sum(1 for r in REVIEWS if r[1] is not None)
    # each document is encoded at most once; later questions cost only their own tokens
    assert 0 < len(planned.prefixes) <= non_null
    assert plain.prefixes == {}
    assert s1.report.fresh_tokens < s2.report.fresh_tokens
    assert s1.report.ops[1].kv_hit_tokens > 0


@pytest.mark.parametrize("sels,order,first", [
    ((0.9, 0.1), None, 1), ((0.1, 0.9), None, 0), ((0.9, 0.1), "as_written", 0)])
def test_filter_order_follows_hints(con, sels, order, first):
    ops = (bfilter("Mentions PRICE?", sel=sels[0], order=order),
           bfilter("Mentions BATTERY?", sel=sels[1], order=order), classify())
    parsed = filters_query(ops)
    s = session(con, parsed, FakeEngine())
    s.execute(parsed.duckdb_sql)
    assert s.report.ops[first].rows_in == len(REVIEWS)
    assert s.report.ops[1 - first].rows_in == s.report.ops[first].rows_out
    assert s.report.ops[first].selectivity_source == "hint"


def test_sampled_selectivity_is_reported_and_answers_kept(con):
    ops = (bfilter("Mentions PRICE?"), bfilter("Mentions BATTERY?"), classify())
    parsed = filters_query(ops)
    engine = FakeEngine()
    s = session(con, parsed, engine, sample_size=2)
    s.execute(parsed.duckdb_sql)
    rep = s.report.to_json()["operators"]
    assert rep[0]["selectivity_source"] == "sample"
    assert 0 < rep[0]["selectivity_est"] < 1
    assert s.report.ops[0].prompts <= len(REVIEWS)  # sampled rows are not asked twice


def test_cache_rerun_computes_nothing_and_no_cache_recomputes(con, tmp_path):
    ops = (bfilter("Mentions PRICE?"), bfilter("Mentions BATTERY?"), classify())
    parsed = filters_query(ops)
    first = session(con, parsed, FakeEngine(), tmp_path)
    result = first.execute(parsed.duckdb_sql)
    again_engine = FakeEngine()
    again = session(con, parsed, again_engine, tmp_path)
    assert again.execute(parsed.duckdb_sql) == result
    assert again_engine.stats.fresh_tokens == 0
    assert again.report.cache_hits > 0
    uncached = session(con, parsed, FakeEngine(), None)
    uncached.execute(parsed.duckdb_sql)
    assert uncached.report.cache_hits == 0 and uncached.report.fresh_tokens > 0


def test_label_answers_of_an_earlier_label_rule_are_not_read(con, tmp_path, monkeypatch):
    """A change of how label sets are scored (infer/api.LABEL_RULE) recomputes cached label
    answers: one table never mixes answers of two rules. Yes/no answers stay cached."""
    from quail_engine.exec import call_prep

    ops = (bfilter("Mentions PRICE?"), classify())
    parsed = filters_query(ops, where=(0,), project=(1,))
    monkeypatch.setattr(call_prep, "LABEL_RULE", call_prep.LABEL_RULE - 1)
    session(con, parsed, FakeEngine(), tmp_path).execute(parsed.duckdb_sql)
    monkeypatch.undo()
    again = session(con, parsed, FakeEngine(), tmp_path)
    again.execute(parsed.duckdb_sql)
    ops_report = {o.kind: o for o in again.report.ops.values()}
    assert ops_report["ai_classify"].cache_hits == 0 and ops_report["ai_classify"].prompts > 0
    assert ops_report["ai_filter"].cache_hits == ops_report["ai_filter"].prompts > 0


def test_null_document_gives_null_answer(con):
    parsed = filters_query((classify(),), where=(), project=(0,))
    rows = session(con, parsed, FakeEngine()).execute(parsed.duckdb_sql).to_pylist()
    assert {r["id"]: r["a0"] for r in rows}[6] is None


def test_empty_table_gives_empty_result_without_prompts(con):
    parsed = filters_query((bfilter("Mentions PRICE?"), bfilter("X?"), classify()),
                           table="empty_reviews")
    engine = FakeEngine()
    assert session(con, parsed, engine).execute(parsed.duckdb_sql).num_rows == 0
    assert engine.calls == 0


def test_unknown_column_is_an_error_before_any_prompt(con):
    loaded = []
    parsed = filters_query((bfilter("Mentions PRICE?"),), where=(0,), project=())
    bad = Parsed("duckdb", "", parsed.ai_ops,
                 "SELECT r.nope FROM reviews AS r WHERE quail_ai_0(r.review)", parsed.cores)
    s = QuailSession(con, lambda: loaded.append(1) or FakeEngine())
    s.parse = lambda sql, dialect: bad
    with pytest.raises(ExecutionError, match="nope"):
        s.execute("...")
    assert loaded == []


def test_join_matches_reference_and_respects_equality(con):
    engine = FakeEngine()
    parsed = join_query(ajoin())
    s = session(con, parsed, engine)
    got = [tuple(r.values()) for r in s.execute(parsed.duckdb_sql).to_pylist()]
    ref_engine = FakeEngine()
    expected = sorted((rid, name) for rid, review, pid in REVIEWS for qid, name in PRODUCTS
                      if pid == qid and ask_one_at_a_time(ref_engine, parsed.ai_ops[0],
                                                          (review, name)))
    assert got == expected and got
    equi_pairs = sum(1 for r in REVIEWS for p in PRODUCTS if r[2] == p[0] and r[1] is not None)
    assert s.report.ops[0].prompts <= equi_pairs
    assert engine.resident == 0


def test_unplanned_ai_call_is_computed_on_the_fly(con):
    op = bfilter("Mentions PRICE?")
    sql = "SELECT r.id FROM reviews AS r WHERE quail_ai_0(r.review) OR r.id = 10 ORDER BY r.id"
    parsed = Parsed("duckdb", sql, (op,), sql, ())
    s = session(con, parsed, FakeEngine())
    got = [r["id"] for r in s.execute(sql).to_pylist()]
    ref = FakeEngine()
    assert got == [rid for rid, review, _ in REVIEWS
                   if rid == 10 or ask_one_at_a_time(ref, op, (review,)) is True]
    assert s.report.ops[0].unplanned > 0


def test_interrupt_keeps_cached_answers(con, tmp_path):
    class Interrupting(FakeEngine):
        def run(self, requests):
            if self.calls >= 2:
                raise KeyboardInterrupt
            return super().run(requests)

    parsed = filters_query((classify(),), where=(), project=(0,))
    s = session(con, parsed, Interrupting(), tmp_path, sample_size=0, batch_size=2)
    with pytest.raises(KeyboardInterrupt):
        s.execute(parsed.duckdb_sql)
    again = session(con, parsed, FakeEngine(), tmp_path)
    again.execute(parsed.duckdb_sql)
    assert again.report.cache_hits > 0


def test_join_anchor_reuses_the_filter_document_kv(con):
    from exec_fakes import Core, Relation

    op_f = bfilter("Mentions BATTERY?")
    # anchored on the reviews by hint: with three one-word products and the question's start
    # encoded with each anchor, anchoring on the products is cheaper here by the cost model
    op_j = ajoin(anchor="r")
    sql = ("SELECT r.id, p.name FROM reviews AS r JOIN products AS p ON "
           "quail_ai_1(r.review, p.name) WHERE quail_ai_0(r.review) ORDER BY r.id, p.name")
    core = Core((Relation("r", "SELECT r.review AS b_0_0, r.review AS b_1_0 FROM reviews r"),
                 Relation("p", "SELECT p.name AS b_1_1 FROM products p")), (0,), (1,), ())
    parsed = Parsed("duckdb", sql, (op_f, op_j), sql, (core,))
    engine = FakeEngine()
    s = session(con, parsed, engine, sample_size=0)
    got = [tuple(r.values()) for r in s.execute(sql).to_pylist()]
    ref = FakeEngine()
    expected = sorted((rid, name) for rid, review, _ in REVIEWS for _, name in PRODUCTS
                      if ask_one_at_a_time(ref, op_f, (review,))
                      and ask_one_at_a_time(ref, op_j, (review, name)))
    assert got == expected and got
    assert "anchor=r" in s.report.plans[0]
    # every review is encoded once: the join's anchors are the filter's resident documents
    assert len(engine.prefixes) == sum(1 for r in REVIEWS if r[1] is not None)
    assert s.report.ops[1].kv_hit_tokens > 0
    assert engine.resident == 0


def test_a_join_stays_anchored_on_its_document_whatever_the_survivors(con):
    """A filter hinted to keep every review keeps four: the join is anchored on the reviews (its
    prompt's first argument, the document) before and after the filter, so the survivors
    change no prompt and there is nothing to re-plan; the rows are the reference's."""
    from dataclasses import replace

    from exec_fakes import Core, Relation

    op_f = bfilter("Mentions BATTERY?", sel=1.0)
    op_j = ajoin()
    op_j = replace(op_j, join=replace(op_j.join, equi=()))
    sql = ("SELECT r.id, p.name FROM reviews AS r JOIN products AS p ON "
           "quail_ai_1(r.review, p.name) WHERE quail_ai_0(r.review) ORDER BY r.id, p.name")
    core = Core((Relation("r", "SELECT r.review AS b_0_0, r.review AS b_1_0 FROM reviews r"),
                 Relation("p", "SELECT p.name AS b_1_1 FROM products p")), (0,), (1,), ())
    parsed = Parsed("duckdb", sql, (op_f, op_j), sql, (core,))
    s = session(con, parsed, FakeEngine(), sample_size=0)
    got = [tuple(r.values()) for r in s.execute(sql).to_pylist()]
    ref = FakeEngine()
    expected = sorted((rid, name) for rid, review, _ in REVIEWS for _, name in PRODUCTS
                      if ask_one_at_a_time(ref, op_f, (review,))
                      and ask_one_at_a_time(ref, op_j, (review, name)))
    assert got == expected and got
    assert "join #1 p anchor=r" in s.report.plans[0]
    assert not [r for r in s.report.remarks if r.startswith("re-planned")]


def test_a_fully_cached_query_loads_no_model_and_no_tokenizer(con, tmp_path):
    from quail_engine.exec.prompt_text import PromptText

    parsed = filters_query((bfilter("Mentions PRICE?"), classify()), where=(0,), project=(1,))
    engine = FakeEngine()
    loads: list[str] = []

    def make(kind):
        def factory():
            loads.append(kind)
            return engine
        return factory

    def run():
        text = PromptText(make("tokenizer"), "fake-model-identity", tmp_path / "tokens")
        s = QuailSession(con, make("model"), SessionConfig(cache_dir=tmp_path, device="cpu"),
                         device_spec=TOY, text=text, model_config=lambda: None)
        s.parse = lambda sql, dialect: parsed
        return s.execute(parsed.duckdb_sql).to_pylist(), s.report

    first, _ = run()
    assert loads == ["tokenizer", "model"]
    loads.clear()
    second, report = run()
    assert second == first and loads == []
    assert report.load_s == 0 and all(o.cache_hits == o.prompts for o in report.ops.values())


def test_answers_of_another_model_identity_are_not_reused(con, tmp_path):
    from quail_engine.exec.prompt_text import PromptText

    parsed = filters_query((bfilter("Mentions PRICE?"),), where=(0,), project=())
    hits = []
    for identity in ("model-a", "model-b", "model-a"):
        engine = FakeEngine()
        s = QuailSession(con, lambda e=engine: e, SessionConfig(cache_dir=tmp_path, device="cpu"),
                         device_spec=TOY, text=PromptText(lambda e=engine: e, identity))
        s.parse = lambda sql, dialect: parsed
        s.execute(parsed.duckdb_sql)
        hits.append(s.report.ops[0].cache_hits)
    assert hits[0] == 0 and hits[1] == 0 and hits[2] == hits[0] + 9  # 9 non-NULL reviews


def _limited(sql, ops, filters=(), projections=()):
    from exec_fakes import Core, Relation

    cols = ", ".join(f"r.review AS b_{i}_0" for i in range(len(ops)))
    core = Core((Relation("r", f"SELECT {cols} FROM reviews AS r"),), tuple(filters), (),
                tuple(projections))
    return Parsed("duckdb", sql, tuple(ops), sql, (core,))


def test_limit_over_a_generate_answers_only_the_kept_rows(con):
    parsed = _limited("SELECT r.id, quail_ai_0(r.review) AS g FROM reviews AS r LIMIT 3",
                      (generate(),), projections=(0,))
    engine = FakeEngine()
    s = session(con, parsed, engine)
    rows = s.execute(parsed.duckdb_sql).to_pylist()
    assert len(rows) == 3 and s.report.ops[0].prompts == 3
    ref = FakeEngine()
    by_id = {rid: review for rid, review, _ in REVIEWS}
    assert all(r["g"] == ask_one_at_a_time(ref, generate(), (by_id[r["id"]],)) for r in rows)


def test_limit_stops_the_filter_once_enough_rows_pass(con):
    ops = (bfilter("Mentions PRICE?"), generate())
    parsed = _limited("SELECT r.id, quail_ai_1(r.review) AS g FROM reviews AS r "
                      "WHERE quail_ai_0(r.review) LIMIT 1", ops, filters=(0,), projections=(1,))
    engine = FakeEngine()
    s = session(con, parsed, engine, sample_size=0)
    rows = s.execute(parsed.duckdb_sql).to_pylist()
    ref = FakeEngine()
    truth = [rid for rid, review, _ in REVIEWS
             if review is not None and ask_one_at_a_time(ref, ops[0], (review,))]
    assert [r["id"] for r in rows] == truth[:1]
    assert s.report.ops[0].rows_in < len(REVIEWS) and s.report.ops[1].prompts == 1


def test_ordered_limit_generates_only_for_the_kept_rows(con):
    ops = (bfilter("Mentions PRICE?"), generate())
    parsed = _limited("SELECT r.id, quail_ai_1(r.review) AS g FROM reviews AS r "
                      "WHERE quail_ai_0(r.review) ORDER BY r.id DESC LIMIT 2", ops,
                      filters=(0,), projections=(1,))
    s = session(con, parsed, FakeEngine())
    rows = s.execute(parsed.duckdb_sql).to_pylist()
    ref = FakeEngine()
    truth = sorted((rid for rid, review, _ in REVIEWS if review is not None
                    and ask_one_at_a_time(ref, ops[0], (review,))), reverse=True)
    assert [r["id"] for r in rows] == truth[:2] and s.report.ops[1].prompts == 2


def test_a_limit_around_the_query_reaches_the_ai_function(con):
    """dbt show's shape: SELECT * FROM (<model SQL>) LIMIT n."""
    parsed = _limited("SELECT * FROM (SELECT r.id, quail_ai_0(r.review) AS g FROM reviews AS r)"
                      " AS model_limit_subq LIMIT 3", (generate(),), projections=(0,))
    s = session(con, parsed, FakeEngine())
    assert s.execute(parsed.duckdb_sql).num_rows == 3 and s.report.ops[0].prompts == 3


def test_join_anchors_are_released_as_their_partners_finish(con):
    """Small batches: an anchor's KV goes as soon as its last pair is answered, so a chunk of
    anchors never needs the arena all at once; the rows are the reference's."""
    parsed = join_query(ajoin())
    cross = Parsed(parsed.dialect, parsed.source_sql, parsed.ai_ops, parsed.duckdb_sql.replace(
        "r.product_id = p.product_id AND ", ""), tuple(
        type(c)(tuple(type(r)(r.alias, r.scan_sql.replace(", r.product_id AS k_0", "").replace(
            ", p.product_id AS k_0", "")) for r in c.relations), c.filters, c.joins,
            c.projections) for c in parsed.cores))
    engine = FakeEngine()
    peak = []
    run = engine.run

    def tracked(requests):
        peak.append(engine.resident)
        return run(requests)

    engine.run = tracked
    s = session(con, cross, engine, batch_size=2, sample_size=0)
    got = sorted(tuple(r.values()) for r in s.execute(cross.duckdb_sql).to_pylist())
    ref = FakeEngine()
    expected = sorted((rid, name) for rid, review, _ in REVIEWS for _, name in PRODUCTS
                      if review is not None
                      and ask_one_at_a_time(ref, parsed.ai_ops[0], (review, name)))
    assert got == expected
    assert max(peak) <= 3 and engine.resident == 0  # 9 anchors, never more than 3 at once


def test_join_question_start_is_encoded_once_per_anchor(con, monkeypatch):
    """The words every pair's question starts with ride in the anchor's prefix: same rows,
    fewer fresh tokens, and no pair runs them again (every review asked about every
    product, so each anchor has several pairs)."""
    from dataclasses import replace

    from exec_fakes import Core, Relation

    from quail_engine.exec.doc_kv import DocKV

    op = ajoin()
    op = replace(op, join=replace(op.join, equi=()))
    sql = ("SELECT r.id, p.name FROM reviews AS r JOIN products AS p ON "
           "quail_ai_0(r.review, p.name) ORDER BY r.id, p.name")
    core = Core((Relation("r", "SELECT r.review AS b_0_0 FROM reviews r"),
                 Relation("p", "SELECT p.name AS b_0_1 FROM products p")), (), (0,), ())

    def run(stem: bool):
        engine = FakeEngine()
        if not stem:
            monkeypatch.setattr(DocKV, "set_stem", lambda self, ids: False)
        parsed = Parsed("duckdb", sql, (op,), sql, (core,))
        s = session(con, parsed, engine)
        rows = s.execute(parsed.duckdb_sql).to_pylist()
        asked = [engine.words[t] for t in engine.prefixes[1]]
        return rows, engine.stats.fresh_tokens, asked

    rows, fresh, first_prefix = run(stem=True)
    rows_plain, fresh_plain, first_prefix_plain = run(stem=False)
    assert rows == rows_plain and rows
    assert fresh < fresh_plain
    assert "Question:" in first_prefix and "Question:" not in first_prefix_plain


def test_an_operators_seconds_leave_out_the_model_load_it_waited_for(con):
    """The first miss loads the model inside the operator's call: that time is the report's
    load (a `model_load` span in the timeline), not the operator's seconds."""
    import time

    from quail_engine.exec.prompt_text import PromptText

    engine = FakeEngine()
    engine.load_phases = {"checkpoint_s": 0.4, "warm_up_s": 0.1}

    def load():
        time.sleep(0.5)
        return engine

    ops = (bfilter("Mentions PRICE?"),)
    parsed = filters_query(ops, where=(0,), project=())
    s = QuailSession(con, load, device_spec=TOY, text=PromptText(lambda: engine, "fake"),
                     model_config=lambda: None)
    s.parse = lambda sql, dialect: parsed
    s.execute(parsed.duckdb_sql)
    rep = s.report.to_json()
    spans = [p for p in rep["timeline"]["phases"] if p["name"] == "model_load"]
    assert len(spans) == 1 and spans[0]["end"] - spans[0]["start"] >= 0.5
    assert rep["load_s"] >= 0.5
    # what the load was made of: the engine's own phases beside the load as the session saw it
    phases = rep["load_phases"]
    assert phases["engine_s"] >= 0.5 and phases["checkpoint_s"] == 0.4
    assert phases["engine_s"] + phases["tokenizer_s"] + phases["device_start_s"] == \
        pytest.approx(rep["load_s"], abs=2e-3)
    # the load and the operator's own seconds are disjoint parts of the filter phase; counted
    # in the operator too, their sum would pass the phase by the load's 0.5 s
    assert rep["operators"][0]["seconds"] + rep["load_s"] <= rep["phases"]["filters"] + 1e-3


def test_each_operator_reports_the_allocator_retries_its_calls_caused(con):
    """An engine's `alloc_retries` (the CUDA caching allocator emptying its cache to retry an
    allocation, a stall inside a pass) reach the report per operator, as its GPU seconds do."""
    ops = (bfilter("Mentions PRICE?"), bfilter("Mentions BATTERY?"), classify())
    parsed = filters_query(ops)
    engine = FakeEngine()
    calls = []
    run = engine.run

    def retrying_run(requests):
        engine.stats.alloc_retries += 2
        calls.append(len(requests))
        return run(requests)

    engine.run = retrying_run
    s = session(con, parsed, engine, sample_size=0)
    s.execute(parsed.duckdb_sql)
    reports = list(s.report.ops.values())
    by_op = [op.alloc_retries for op in reports]
    assert len(by_op) == 3 and sum(by_op) == 2 * len(calls) and all(n > 0 for n in by_op)
    assert all(op.to_json()["alloc_retries"] == op.alloc_retries for op in reports)
