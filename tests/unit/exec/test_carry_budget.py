"""Documents a filter leaves resident for a later join (the plan's `carry`) hold at most
the plan's carry share of a bounded KV arena; the join encodes the others again. QUAIL-B's IMDB-3 at sf0.1
(a filter over 5,000 reviews, then a join on the same reviews) filled the H200's arena with the
carried reviews and failed with `KV arena full`."""

import pytest
from exec_fakes import FakeEngine, review_db

from quail_engine.errors import ExecutionError
from quail_engine.exec.config import SessionConfig
from quail_engine.exec.doc_kv import kv_capacity_tokens
from quail_engine.exec.session import QuailSession
from quail_engine.plan.chunking import DEFAULT as CHUNKING
from quail_engine.plan.cost import DeviceSpec

FILLER = " ".join(f"w{j}" for j in range(20))  # reviews long next to product names: anchors
REVIEWS = [(i, f"price price item{i} {FILLER}" if i % 3 else f"plain item{i} {FILLER}", 1)
           for i in range(1200)]
PRODUCTS = [(1, "widget"), (1, "gadget"), (1, "price")]
SQL = ("SELECT r.id, p.name FROM reviews AS r JOIN products AS p "
       "ON AI_FILTER(PROMPT('Does the review {0} mention {1}?', r.review, p.name)) "
       "WHERE AI_FILTER(PROMPT('Does this review mention PRICE? {0}', r.review)) "
       "ORDER BY r.id, p.name")


class _Arena:
    def __init__(self, num_pages, page_size):
        self.num_pages, self.page_size = num_pages, page_size


class _Model:
    def __init__(self, arena):
        self.arena = arena


def bounded_engine(capacity_tokens: int | None, extends: bool = False):
    """FakeEngine whose resident prefixes may hold at most `capacity_tokens` (None: any);
    `extends`: it extends resident prefixes (as the CPU and GPU engines do)."""

    class Bounded(FakeEngine):
        extends_prefixes = extends

        def extend_prefixes(self, handles, tokens):  # (only the new tokens are computed)
            out = [self.add_prefix(self.prefixes[h.id] + tuple(tokens)) for h in handles]
            self.stats.fresh_tokens -= sum(h.num_tokens for h in handles)
            return out

        def __init__(self):
            super().__init__()
            self.peak = 0
            if capacity_tokens is not None:
                self.model = _Model(_Arena(capacity_tokens // 4, 4))

        def _held(self):
            return sum(len(self.prefixes[p]) for p, n in self.refs.items() if n > 0)

        def add_prefix(self, tokens):
            handle = super().add_prefix(tokens)
            self.peak = max(self.peak, self._held())
            if capacity_tokens is not None and self._held() > capacity_tokens:
                raise ExecutionError(f"KV arena full: {self._held()} > {capacity_tokens}")
            return handle

    return Bounded


def _run(capacity_tokens, sql=SQL, extends=False):
    engines = []

    def factory():
        engines.append(bounded_engine(capacity_tokens, extends)())
        return engines[-1]

    session = QuailSession(review_db(REVIEWS, PRODUCTS), factory,
                           device_spec=DeviceSpec("toy", 1e11, 2e10))
    rows = session.execute(sql, "snowflake").to_pylist()
    return rows, session.report.to_json(), engines[0]


def test_unbounded_engine_keeps_every_filtered_document_for_the_join():
    rows, report, engine = _run(None)
    assert kv_capacity_tokens(engine) is None
    assert rows and not any("encoded again" in r for r in report["remarks"])
    assert any("anchor=r reuse r:r.review" in p for p in report["plans"]), report["plans"]


def test_carried_documents_are_joined_early_when_they_fill_their_share_of_the_arena():
    """The join is asked for the carried documents' pairs while their KV is resident, so no
    document is encoded twice: the same fresh tokens as with an unbounded arena."""
    reference, unbounded_report, unbounded = _run(None)
    capacity = 16384
    assert unbounded.peak > capacity  # every carried review at once would not fit
    rows, report, engine = _run(capacity)
    assert kv_capacity_tokens(engine) == capacity
    assert rows == reference
    assert engine.peak <= capacity
    assert engine.stats.fresh_tokens == unbounded.stats.fresh_tokens
    assert any("the join was asked" in r and "during the filters" in r
               for r in report["remarks"]), report["remarks"]
    assert not any("encoded again" in r for r in report["remarks"])
    ops = {o["op"]: o for o in report["operators"]}
    ref_ops = {o["op"]: o for o in unbounded_report["operators"]}
    assert all(o["unplanned"] == 0 for o in ops.values())
    assert {k: (o["rows_in"], o["rows_out"]) for k, o in ops.items()} == \
        {k: (o["rows_in"], o["rows_out"]) for k, o in ref_ops.items()}


def test_a_filtered_partner_runs_first_so_the_join_is_still_asked_early():
    """The partner relation's filter runs before the carried documents' (its survivors are then
    known), so the join is asked for the carried documents while resident: none is encoded
    twice: no more fresh tokens than with an unbounded arena (fewer here: there the join,
    re-planned onto the one product that passed, encodes its anchor side itself)."""
    sql = SQL.replace("ORDER BY", "AND AI_FILTER(PROMPT('Does {0} name a PRICE?', p.name)) "
                                  "ORDER BY")
    reference, _, unbounded = _run(None, sql)
    rows, report, engine = _run(16384, sql)
    assert rows == reference and engine.peak <= 16384 < unbounded.peak
    assert any("the join was asked" in r for r in report["remarks"]), report["remarks"]
    assert not any("encoded again" in r for r in report["remarks"])
    assert engine.stats.fresh_tokens <= unbounded.stats.fresh_tokens


def test_carried_documents_beyond_their_share_are_encoded_again_when_the_join_cannot_run(
        monkeypatch):
    """Where the join cannot be asked early (`_flush_carry` finds no early ask for the plan:
    here forced, every plan of these fakes has one), the documents past the share are released
    and the join encodes them again: the same rows, the arena's bound kept, and a remark."""
    from quail_engine.exec.filter_runner import FilterRunner

    reference, _, unbounded = _run(None)
    monkeypatch.setattr(FilterRunner, "_flush_carry", lambda self, *args: False)
    rows, report, engine = _run(16384)
    assert rows == reference and engine.peak <= 16384 < unbounded.peak
    remark = next(r for r in report["remarks"] if "encoded again" in r)
    assert f"{CHUNKING.carry_share:.0%} of the KV arena" in remark
    assert engine.stats.fresh_tokens > unbounded.stats.fresh_tokens


@pytest.mark.parametrize("arena, expected", [(_Arena(10, 64), 640), (_Arena(None, 64), None),
                                             (object(), None)])
def test_kv_capacity_tokens_reads_a_paged_arena(arena, expected):
    class Engine:
        model = _Model(arena)

    assert kv_capacity_tokens(Engine()) == expected


def _run_recording(extends: bool):
    """`_run(None)` on an engine that can extend prefixes (or not): rows, report, engine and
    every full prompt it ran (prefix + own tokens) with how often."""
    prompts = {}

    class Recording(bounded_engine(None, extends)):
        def run(self, requests):
            for r in requests:
                full = " ".join(self.words[i] for i in (
                    *(self.prefixes[r.prefix.id] if r.prefix else ()), *r.tokens))
                prompts[full] = prompts.get(full, 0) + 1
            return super().run(requests)

    engines = []
    session = QuailSession(review_db(REVIEWS, PRODUCTS),
                           lambda: engines.append(Recording()) or engines[-1],
                           device_spec=DeviceSpec("toy", 1e11, 2e10))
    rows = session.execute(SQL, "snowflake").to_pylist()
    return rows, session.report.to_json(), engines[0], prompts


def test_carried_documents_are_extended_by_the_joins_question_stem():
    """The join's question starts alike for every pair ("Question: Does the review (above)
    mention"): its tokens are computed once per carried document (the engine's
    `extend_prefixes`), as for documents the join encodes itself, not once per pair. Same
    rows, the same prompts, fewer fresh tokens."""
    reference, _, plain, plain_prompts = _run_recording(False)
    rows, report, engine, prompts = _run_recording(True)
    assert rows == reference and prompts == plain_prompts
    join = next(o for o in report["operators"] if o["kind"] == "ai_join")
    pairs, stem = join["prompts"], len("Does the review (see above) mention".split())
    assert pairs > 1000
    # each pair's own tokens shrank by the stem, each carried review grew by it once
    saved = plain.stats.fresh_tokens - engine.stats.fresh_tokens
    assert saved >= stem * (pairs - pairs // len(PRODUCTS)), (saved, pairs)


STAR = ("SELECT r.id, p.name AS p, q.name AS q FROM reviews AS r "
        "JOIN products AS p ON AI_FILTER(PROMPT('Does the review {0} mention {1}?', r.review, "
        "p.name)) "
        "JOIN products AS q ON AI_FILTER(PROMPT('Does the review {0} mention {1}?', r.review, "
        "q.name)) "
        "WHERE AI_FILTER(PROMPT('Does this review mention PRICE? {0}', r.review)) "
        "AND AI_FILTER(PROMPT('Does {0} name a PRICE?', p.name)) "
        "ORDER BY r.id, p, q")


@pytest.mark.parametrize("capacity", [None, 16384])
def test_a_star_of_joins_on_the_filtered_documents_encodes_each_once(monkeypatch, capacity):
    """Two AI joins anchored on the reviews a filter keeps (QUAIL-B BIO-4: reports joined to two
    filtered term sets): both joins are asked for the carried reviews while they are resident,
    in the plan's order, so a review is encoded once for the filter and both joins (before, the
    second join encoded every kept review again, and past the arena's share the first one
    too): fewer fresh tokens, the same rows and per-operator counts. (The CPU replay of BIO-4
    at sf0.1 through bench/quailb: 8.68 M fresh tokens -> 6.48 M, minimum 5.84 M.)"""
    from quail_engine.plan import strategy

    rows, report, engine = _run(capacity, STAR, extends=True)
    monkeypatch.setattr(strategy, "star_anchor", lambda cand: None)
    reference, before_report, before = _run(capacity, STAR, extends=True)
    assert rows == reference and len(rows) > 100
    assert "join #0 p anchor=r reuse r:r.review" in report["plans"][0], report["plans"]
    assert "join #1 q anchor=r" in report["plans"][0], report["plans"]
    assert engine.stats.fresh_tokens < before.stats.fresh_tokens
    assert any("the join was asked" in r for r in report["remarks"]), report["remarks"]
    assert not any("encoded again" in r for r in report["remarks"])
    if capacity is not None:
        assert engine.peak <= capacity
    assert all(o["unplanned"] == 0 for o in report["operators"])
    assert {o["op"]: (o["rows_in"], o["rows_out"]) for o in report["operators"]} == \
        {o["op"]: (o["rows_in"], o["rows_out"]) for o in before_report["operators"]}


@pytest.mark.parametrize("capacity", [None, 16384])
def test_a_star_of_joins_with_no_filtered_documents_shares_each_chunk(monkeypatch, capacity):
    """Two AI joins anchored on every review (QUAIL-B IMDB-8: reviews joined to the aspects
    twice, no filter on the reviews): the reviews in chunks, each chunk encoded once and asked
    both joins while resident, where each join encoded every review itself: fewer fresh
    tokens, the same rows and per-operator counts, the arena's bound kept."""
    from quail_engine.plan import strategy

    sql = STAR.replace("WHERE AI_FILTER(PROMPT('Does this review mention PRICE? {0}', "
                       "r.review)) AND", "WHERE")
    rows, report, engine = _run(capacity, sql, extends=True)
    monkeypatch.setattr(strategy, "star_anchor", lambda cand: None)
    reference, before_report, before = _run(capacity, sql, extends=True)
    assert rows == reference and len(rows) > 100
    assert "reuse" not in report["plans"][0]  # no filter leaves the reviews resident
    assert engine.stats.fresh_tokens < before.stats.fresh_tokens
    joins = [o for o in report["operators"] if o["kind"] == "ai_join"]
    assert sum(o["kv_hit_tokens"] for o in joins) > sum(
        o["kv_hit_tokens"] for o in before_report["operators"] if o["kind"] == "ai_join")
    if capacity is not None:
        assert engine.peak <= capacity
    assert all(o["unplanned"] == 0 for o in report["operators"])
    assert {o["op"]: (o["rows_in"], o["rows_out"]) for o in report["operators"]} == \
        {o["op"]: (o["rows_in"], o["rows_out"]) for o in before_report["operators"]}


def test_a_chain_asks_its_first_join_early_for_the_carried_documents(monkeypatch):
    """A longer plan that starts from the filtered reviews with an AI join on them, then joins
    on (QUAIL-B IMDB-10: filtered reviews, aspects, reviews again): its first join is asked for
    the carried reviews while resident, none encoded again; the same rows as the fallback that
    encodes them again, with fewer fresh tokens."""
    from quail_engine.exec.filter_runner import FilterRunner

    sql = SQL.replace("WHERE", "JOIN products AS q ON AI_FILTER(PROMPT('Is {0} like {1}?', "
                      "p.name, q.name)) WHERE")
    rows, report, engine = _run(16384, sql)
    assert report["plans"][0].count("ai_join") >= 2
    assert any("the join was asked" in r for r in report["remarks"]), report["remarks"]
    assert not any("encoded again" in r for r in report["remarks"])
    monkeypatch.setattr(FilterRunner, "_flush_carry", lambda self, *args: False)
    reference, _, fallback = _run(16384, sql)
    assert rows == reference and len(rows) > 100
    assert engine.peak <= 16384
    assert engine.stats.fresh_tokens < fallback.stats.fresh_tokens


def test_a_star_answered_from_the_cache_encodes_nothing(tmp_path):
    """Run again over a warm answer cache (a dbt re-run), the star's chunks ask nothing of the
    engine: no document is encoded for answers the cache already holds."""
    sql = STAR.replace("WHERE AI_FILTER(PROMPT('Does this review mention PRICE? {0}', "
                       "r.review)) AND", "WHERE")
    runs = []
    for _ in range(2):
        engine = bounded_engine(16384, True)()
        session = QuailSession(review_db(REVIEWS, PRODUCTS), lambda e=engine: e,
                               SessionConfig(cache_dir=tmp_path, device="cpu"),
                               device_spec=DeviceSpec("toy", 1e11, 2e10))
        runs.append((session.execute(sql, "snowflake").to_pylist(), engine))
    (first, cold), (second, warm) = runs
    assert first == second and len(first) > 100
    assert cold.stats.fresh_tokens > 0 and cold.prefixes
    assert warm.stats.fresh_tokens == 0 and not warm.prefixes
