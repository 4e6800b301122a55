"""Golden plan tests: the planner with hand-built cores and estimates, no engine, no model."""

import pytest
from plan_fakes import Core, Rel, context, filter_op, info, join_op

from quail_engine.plan.build import build_logical
from quail_engine.plan.cost import Work
from quail_engine.plan.filter_order import choose_order, expected_seconds
from quail_engine.plan.join_order import Candidate, JoinEdge, pareto, plan_joins
from quail_engine.plan.optimizer import optimize
from quail_engine.plan.planner import plan_core
from quail_testing.equalities import conjunct


@pytest.fixture(autouse=True)
def _prefix_sharing_on(monkeypatch):
    """Plans as the product's default runs them (plan/filter_chunks.py: with prefix sharing a
    filter chunk counts rows past their shared beginnings)."""
    monkeypatch.setenv("QUAIL_PREFIX_SHARING", "1")


# Filter order: (selectivities, document tokens, question tokens, as_written) -> order
FILTER_ORDER_CASES = [
    # different documents, equal cost: most selective first
    ((0.9, 0.1, 0.5), (100, 100, 100), (16, 16, 16), False, (1, 2, 0)),
    # equal selectivity: cheapest document first
    ((0.5, 0.5), (400, 50), (16, 16), False, (1, 0)),
    # expensive but very selective beats cheap and unselective
    ((0.9, 0.01), (50, 400), (16, 16), False, (1, 0)),
    # order => 'as_written' keeps the written order
    ((0.9, 0.1, 0.5), (100, 100, 100), (16, 16, 16), True, (0, 1, 2)),
]


@pytest.mark.parametrize("sels,docs,questions,as_written,expected", FILTER_ORDER_CASES)
def test_filter_order_under_given_selectivities(sels, docs, questions, as_written, expected):
    ops = [info(i, "ai_filter", ["r"], {"r": d}, sel=s, doc=f"r.c{i}", question=q,
                as_written=as_written) for i, (s, d, q) in enumerate(zip(sels, docs, questions))]
    ctx = context(ops, {"r": 1000})
    assert choose_order(range(len(ops)), 1000, ctx) == expected


def test_shared_document_first_filter_pays_the_encoding():
    # Same document for both: whichever runs first encodes it; the chosen order is the cheaper.
    ops = [info(0, "ai_filter", ["r"], {"r": 300}, sel=0.2, doc="r.review", question=40),
           info(1, "ai_filter", ["r"], {"r": 300}, sel=0.6, doc="r.review", question=8)]
    ctx = context(ops, {"r": 500})
    order = choose_order((0, 1), 500, ctx)
    assert expected_seconds(order, 500, ctx) <= min(expected_seconds(o, 500, ctx)
                                                    for o in ((0, 1), (1, 0)))


def _two_filter_core():
    core = Core((Rel("r", columns=("b_0_0", "b_1_0", "b_2_0")),), filters=(0, 1),
                projections=(2,))
    ai_ops = [filter_op("r", "review", "Is it about price?"),
              filter_op("r", "review", "Is it positive?"), filter_op("r", "review")]
    return core, ai_ops


GOLDEN_LOGICAL = [
    # sels of ops 0,1 -> logical plan text
    ((0.9, 0.1), "project[#2](ai_filter#0[kv](ai_filter#1(scan(r; cols=b_0_0,b_1_0,b_2_0))))"),
    ((0.1, 0.9), "project[#2](ai_filter#1[kv](ai_filter#0(scan(r; cols=b_0_0,b_1_0,b_2_0))))"),
]


@pytest.mark.parametrize("sels,expected", GOLDEN_LOGICAL)
def test_logical_plan_golden(sels, expected):
    core, ai_ops = _two_filter_core()
    ops = [info(i, "ai_filter", ["r"], {"r": 120}, sel=s, doc="r.review")
           for i, s in enumerate(sels)] + [info(2, "ai_classify", ["r"], {"r": 120}, doc="r.review")]
    ctx = context(ops, {"r": 200}, columns={"r": ("b_0_0", "b_1_0", "b_2_0")})
    assert optimize(build_logical(core, ai_ops), ctx).text() == expected


def test_physical_plan_kv_lifecycle_one_encoding_released_after_last_reader():
    core, ai_ops = _two_filter_core()
    ops = [info(0, "ai_filter", ["r"], {"r": 120}, sel=0.9, doc="r.review"),
           info(1, "ai_filter", ["r"], {"r": 120}, sel=0.1, doc="r.review"),
           info(2, "ai_classify", ["r"], {"r": 120}, doc="r.review")]
    plan = plan_core(core, ai_ops, context(ops, {"r": 200}))
    assert plan.text().splitlines() == [
        "scan r",
        "filter #1 r encode r:r.review",
        "filter #0 r reuse r:r.review",
        "project #2 r reuse r:r.review release r:r.review",
        "calls: cached answers skipped, prefix-cached documents first (observed per call)",
        "batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth",
        "chunks arena_share=0.25 filter_rows=256",
        "filter chunks r: sized by #1's documents (120 tokens, past shared beginnings); "
        "first_filter_rows until the arena is known",
    ]
    assert [round(s.rows_out, 6) for s in plan.steps] == [200, 20, 18, 18]


def _join_core(equi=(), conj_r=()):
    core = Core((Rel("r", conjuncts=tuple(conjunct(c) for c in conj_r)), Rel("p")),
                filters=(0,), joins=(1,))
    ai_ops = [filter_op("r", "review"), join_op("r", "review", "p", "description", equi)]
    return core, ai_ops


def test_equality_and_relational_pushdown():
    core, ai_ops = _join_core(equi=("r.product_id = p.product_id",), conj_r=("r.stars > 3",))
    ops = [info(0, "ai_filter", ["r"], {"r": 100}, doc="r.review"),
           info(1, "ai_join", ["r", "p"], {"r": 100, "p": 300})]
    plan = optimize(build_logical(core, ai_ops), context(ops, {"r": 100, "p": 10}))
    assert plan.text() == ("ai_join#1[r.product_id = p.product_id]"
                           "(ai_filter#0(scan(r; where r.stars > 3)), scan(p))")


@pytest.mark.parametrize("tokens,rows,expected_anchor", [
    ({"r": 40, "p": 400}, {"r": 100, "p": 100}, "p"),   # the long side is the anchor
    ({"r": 400, "p": 40}, {"r": 100, "p": 100}, "r"),
    ({"r": 400, "p": 40}, {"r": 50, "p": 80}, "r"),
])
def test_anchor_is_the_long_side(tokens, rows, expected_anchor):
    core, ai_ops = _join_core()
    ops = [info(0, "ai_filter", ["r"], {"r": tokens["r"]}, sel=1.0, doc="r.review"),
           info(1, "ai_join", ["r", "p"], tokens)]
    plan = plan_core(core, ai_ops, context(ops, rows))
    joins = [s for s in plan.steps if s.kind == "join"]
    assert [s.anchor for s in joins] == [expected_anchor]


def test_anchor_hint_is_honoured_with_a_remark():
    core, ai_ops = _join_core()
    ops = [info(0, "ai_filter", ["r"], {"r": 40}, sel=1.0, doc="r.review"),
           info(1, "ai_join", ["r", "p"], {"r": 40, "p": 400}, anchor="r")]
    plan = plan_core(core, ai_ops, context(ops, {"r": 100, "p": 100}))
    assert [s.anchor for s in plan.steps if s.kind == "join"] == ["r"]
    assert plan.remarks and "anchor hint kept" in plan.remarks[0]


def test_an_anchor_hint_off_the_joins_document_is_not_followed_with_a_remark():
    """A join's document is its prompt's first argument's relation whatever the plan: a hint
    naming the other side is dropped before the joins are ordered (and re-planned), and said."""
    from dataclasses import replace

    core, ai_ops = _join_core()
    ops = [info(0, "ai_filter", ["r"], {"r": 40}, sel=1.0, doc="r.review"),
           replace(info(1, "ai_join", ["r", "p"], {"r": 40, "p": 400}, anchor="p"),
                   document="r")]
    plan = plan_core(core, ai_ops, context(ops, {"r": 100, "p": 100}))
    assert [s.anchor for s in plan.steps if s.kind == "join"] == ["r"]
    assert plan.context.ops[1].anchor_hint is None
    assert len(plan.hint_remarks) == 1
    assert plan.hint_remarks[0].startswith("ai_join #1: the anchor hint 'p' is not followed")


def test_equality_fraction_shrinks_candidate_pairs():
    ops = [info(1, "ai_join", ["r", "p"], {"r": 40, "p": 400})]
    edges = [JoinEdge(1, "r", "p")]
    full = plan_joins(["r", "p"], edges, context(ops, {"r": 100, "p": 10}))[0]
    eq = plan_joins(["r", "p"], edges,
                    context(ops, {"r": 100, "p": 10}, pair_fraction={("p", "r"): 0.1}))[0]
    assert full.steps[-1].rows_in == 1000 and eq.steps[-1].rows_in == pytest.approx(100)
    assert eq.work.fresh_tokens < full.work.fresh_tokens


def _cand(name, *work):
    return Candidate((name,), (), 1.0, Work(*work))


def test_pruning_keeps_exactly_the_non_dominated_set():
    a, b, c = _cand("a", 10, 100, 5, 5), _cand("b", 20, 50, 5, 5), _cand("c", 5, 200, 1, 9)
    dominated = _cand("d", 20, 100, 5, 5)
    duplicate = _cand("e", 10, 100, 5, 5)
    kept = pareto([dominated, a, b, c, duplicate])
    assert sorted(k.start[0] for k in kept) == ["a", "b", "c"]


def test_dp_keeps_both_anchor_choices_when_neither_dominates():
    # long anchor: fewer fresh tokens but more KV reads; neither dominates the other
    ops = [info(1, "ai_join", ["r", "p"], {"r": 40, "p": 400})]
    cands = plan_joins(["r", "p"], [JoinEdge(1, "r", "p")], context(ops, {"r": 100, "p": 100}))
    anchors = sorted(c.steps[-1].anchor for c in cands)
    assert anchors == ["p", "r"]
    assert cands[0].steps[-1].anchor == "p"


def test_replanning_after_a_join_changes_the_order_of_the_remaining_joins():
    edges = [JoinEdge(1, "a", "b"), JoinEdge(2, "b", "c"), JoinEdge(3, "a", "d")]
    ops = [info(1, "ai_join", ["a", "b"], {"a": 5, "b": 2000}, sel=0.5),
           info(2, "ai_join", ["b", "c"], {"b": 2000, "c": 5}, sel=0.01),
           info(3, "ai_join", ["a", "d"], {"a": 5, "d": 5}, sel=0.5)]
    ctx = context(ops, {"a": 20, "b": 20, "c": 1, "d": 1})
    estimated = 20 * 20 * 0.5

    def remaining(observed):
        best = plan_joins("abcd", edges, ctx, start=(frozenset("ab"), observed))[0]
        return [s.alias for s in best.steps]

    # as estimated, the very selective join with c shrinks the large intermediate first;
    # when a single row survived, that no longer pays and d goes first
    assert remaining(estimated) == ["c", "d"]
    assert remaining(1) == ["d", "c"]


@pytest.mark.parametrize("hint,hits,n,expected", [
    (0.2, 8, 8, (0.2, "hint")),          # a hint wins over a sample
    (None, 8, 8, (8.5 / 9, "sample")),   # never exactly 1 from a small sample
    (None, 0, 8, (0.5 / 9, "sample")),
    (None, 0, 0, (0.5, "default")),
])
def test_selectivity_sources(hint, hits, n, expected):
    from quail_engine.plan.selectivity import estimate

    value, source = estimate(hint, hits, n)
    assert (round(value, 9), source) == (round(expected[0], 9), expected[1])


def test_join_anchors_on_the_document_its_filter_left_resident():
    # each review pairs with one product only, so a product anchor would be reused more; but
    # the reviews' KV is already resident after their filter, so anchoring there is free
    core, ai_ops = _join_core(equi=("r.product_id = p.product_id",))
    ops = [info(0, "ai_filter", ["r"], {"r": 300}, sel=0.5, doc="r.review"),
           info(1, "ai_join", ["r", "p"], {"r": 300, "p": 20})]
    plan = plan_core(core, ai_ops, context(ops, {"r": 100, "p": 10},
                                           pair_fraction={("p", "r"): 0.1}))
    assert plan.text().splitlines() == [
        "scan r",
        "scan p",
        "filter #0 r encode r:r.review",
        "join #1 p anchor=r reuse r:r.review release r:r.review",
        "calls: cached answers skipped, prefix-cached documents first (observed per call)",
        "batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth",
        "chunks arena_share=0.25 filter_rows=256 anchors=128/1024 carry_share=0.5",
        "filter chunks r: sized by #0's documents (300 tokens, past shared beginnings); "
        "first_filter_rows until the arena is known",
        "carry r:r.review early=pair flush=outgrown",
        "join #1 chunk KV: private per chunk, resident documents taken",
        "replan joins after filters",
    ]
