"""The executor's join strategy decided from the join order (plan/strategy.py): the anchor of a
star, how the joins are asked early for documents a filter carries, the order filters run, where
projections run, where the joins are re-planned, which two joins share anchor chunks."""

from dataclasses import replace

import pytest
from plan_fakes import context, info

from quail_engine.plan.cost import Work
from quail_engine.plan.join_order import Candidate, JoinStep
from quail_engine.plan.join_program import handoff, shares_anchor_chunks
from quail_engine.plan.nodes import Scan
from quail_engine.plan.physical import Carry, PhysicalPlan
from quail_engine.plan.strategy import (
    EARLY_LEADING,
    EARLY_PAIR,
    EARLY_STAR,
    early_ask,
    filter_order,
    outer_free,
    replans,
    star_anchor,
    with_strategy,
)
from quail_engine.sql.ir import AiOp, JoinInfo


def _cand(start, *steps):
    """A join order from relation `start`; steps: (alias, op or None, anchor)."""
    return Candidate((start,), tuple(JoinStep(a, op, anchor) for a, op, anchor in steps),
                     1.0, Work())


STAR = _cand("r", ("p", 0, "r"), ("q", 1, "r"))
CHAIN = _cand("r1", ("a1", 0, "r1"), ("r2", 1, "r2"), ("a2", 2, "r2"))
PAIR = _cand("r", ("p", 0, "r"))
PAIR_FROM_P = _cand("p", ("r", 0, "r"))

# candidate -> the relation its star anchors on
STARS = [
    (STAR, "r"),
    (CHAIN, None),                                  # the later joins anchor elsewhere
    (PAIR, None),                                   # one join is no star
    (_cand("r", ("p", 0, "r"), ("q", None, None)),  # a plain equi join in it
     None),
    (_cand("r", ("p", 0, "r"), ("q", 1, "p")), None),
    (None, None),
]


@pytest.mark.parametrize("cand,expected", STARS)
def test_star_anchor(cand, expected):
    assert star_anchor(cand) == expected


# (carried relation, candidate, relations) -> how the joins are asked early
EARLY = [
    ("r", STAR, ("r", "p", "q"), EARLY_STAR),
    ("r1", CHAIN, ("r1", "a1", "r2", "a2"), EARLY_LEADING),
    ("r2", CHAIN, ("r1", "a1", "r2", "a2"), None),    # its join comes later
    ("r", PAIR, ("r", "p"), EARLY_PAIR),
    ("r", PAIR_FROM_P, ("r", "p"), EARLY_PAIR),       # either side starts a two-relation core
    ("r", _cand("r", ("p", None, None)), ("r", "p"), None),
    ("r", None, ("r",), None),
]


@pytest.mark.parametrize("carried,cand,relations,expected", EARLY)
def test_early_ask(carried, cand, relations, expected):
    assert early_ask(carried, cand, relations) == expected


@pytest.mark.parametrize("relations,carried,expected", [
    (("r", "p", "q"), "r", ("p", "q", "r")),
    (("r", "p", "q"), None, ("r", "p", "q")),
    (("r", "p"), "p", ("r", "p")),
])
def test_the_carried_relation_filters_last(relations, carried, expected):
    assert filter_order(relations, carried) == expected


def _join(kind):
    return AiOp("ai_join", "Does {0} match {1}?", join=JoinInfo(kind, ("r",), ("p",), ()))


@pytest.mark.parametrize("kinds,expected", [
    ((), True), (("inner",), True), (("inner", "cross"), True), (("inner", "left"), False)])
def test_projections_run_over_the_joined_rows_only_under_inner_joins(kinds, expected):
    ai_ops = [_join(k) for k in kinds]
    assert outer_free(range(len(ai_ops)), ai_ops) is expected


@pytest.mark.parametrize("relations,cand,expected", [
    (("r", "p"), PAIR, ("filters",)),                     # one join: its survivors only
    (("r", "p", "q"), STAR, ("filters", "join")),          # and after each join but the last
    (("r",), None, ()),
])
def test_the_joins_are_planned_again_where_rows_are_observed(relations, cand, expected):
    plan = PhysicalPlan(Scan("r"), (), (cand,) if cand else (), relations=relations)
    assert replans(plan) == expected


def _ctx(nxt_aliases=("r2", "a2"), keyed=None, shares=True):
    ops = [info(1, "ai_join", ["r2", "a1"], {"r2": 200, "a1": 3}),
           replace(info(2, "ai_join", list(nxt_aliases), dict.fromkeys(nxt_aliases, 3)),
                   shares_document=shares)]
    return context(ops, {"r1": 10, "a1": 5, "r2": 10, "a2": 5}, pair_fraction=keyed)


R2 = JoinStep("r2", 1, "r2")
A2 = JoinStep("a2", 2, "r2")


@pytest.mark.parametrize("ctx,step,nxt,expected", [
    (_ctx(), R2, A2, True),                                   # IMDB-10's last two joins
    (_ctx(("r2", "a2", "a1")), R2, A2, False),                # the second reads the chain too
    (_ctx(keyed={("a2", "r2"): 0.5}), R2, A2, False),         # an equality key ties them
    (_ctx(shares=False), R2, A2, False),                      # no shared document
    (_ctx(), JoinStep("r2", 1, "a1"), A2, False),             # the first anchored elsewhere
    (_ctx(), R2, JoinStep("a1", 2, "r2"), False),             # the second's relation joined
])
def test_two_joins_share_the_anchor_chunks_of_the_relation_the_first_brings_in(
        ctx, step, nxt, expected):
    assert shares_anchor_chunks(ctx, step, nxt, {"r1", "a1"}) is expected


@pytest.mark.parametrize("step,rest,joined,expected", [
    (R2, [A2], {"r1", "a1"}, frozenset({"r2"})),     # the last join reads r2 (and a2, new)
    (R2, [A2, JoinStep("x", None)], {"r1", "a1"}, None),  # not the second-to-last
    (R2, [JoinStep("r2", 2, "r2")], {"r1", "a1"}, None),  # a second join to the same relation
])
def test_the_second_to_last_join_hands_the_last_the_tuples_it_reads(step, rest, joined,
                                                                      expected):
    assert handoff(_ctx(), step, rest, joined, ("r1", "a1", "r2", "a2")) == expected


def test_a_relation_keyed_to_the_last_joins_is_handed_over_too():
    assert handoff(_ctx(keyed={("a1", "a2"): 0.5}), R2, [A2], {"r1", "a1"},
                   ("r1", "a1", "r2", "a2")) == frozenset({"r2", "a1"})


@pytest.mark.parametrize("shares,expected", [(True, "r"), (False, None)])
def test_a_star_is_asked_in_anchor_chunks_only_where_its_first_join_shares_a_document(
        shares, expected):
    ops = [replace(info(0, "ai_join", ["r", "p"], {"r": 50, "p": 5}), shares_document=shares),
           info(1, "ai_join", ["r", "q"], {"r": 50, "q": 5})]
    ctx = context(ops, {"r": 10, "p": 5, "q": 5})
    plan = with_strategy(PhysicalPlan(Scan("r"), (), (STAR,), relations=("r", "p", "q"),
                                      context=ctx))
    assert plan.star == expected
    assert ("star anchor=r joins #0,#1" in plan.strategy_lines()) is (expected is not None)


@pytest.mark.parametrize("carried,expected", [(None, "r"), ("r", None), ("p", "r")])
def test_a_star_is_asked_in_chunks_by_the_joins_unless_the_filters_carry_its_documents(
        carried, expected):
    ctx = context([info(0, "ai_join", ["r", "p"], {"r": 50, "p": 5}),
                   info(1, "ai_join", ["r", "q"], {"r": 50, "q": 5})], {"r": 10, "p": 5, "q": 5})
    carry = Carry(carried, f"{carried}:doc") if carried else None
    plan = with_strategy(PhysicalPlan(Scan("r"), (), (STAR,), relations=("r", "p", "q"),
                                      context=ctx, carry=carry))
    assert plan.star == "r" and plan.star_chunks == expected
    assert (plan.carry is not None and plan.carry.early == EARLY_STAR) is (carried == "r")
