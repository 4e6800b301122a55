"""The joins' program (plan/join_program.py): each turn of a join order with what the executor
does there (which step takes the carry, the next join asked ahead with it, the joins riding along
its anchor chunks, the handoff), for the plan's order and for an order re-planned from observed
rows (PhysicalPlan.replan_joins)."""

from dataclasses import replace

import pytest
from plan_fakes import context, info

from quail_engine.plan.cost import Work
from quail_engine.plan.join_choice import choose_join
from quail_engine.plan.join_order import Candidate, JoinEdge, JoinStep
from quail_engine.plan.join_program import SHARE, TAKE, ChunkKV, join_program
from quail_engine.plan.nodes import Scan
from quail_engine.plan.physical import PhysicalPlan, Step
from quail_engine.plan.strategy import with_strategy

RELATIONS = ("r1", "a1", "r2", "a2")
# reviews r1 - aspects a1 - reviews r2 - aspects a2, each join anchored on its reviews
CTX = context([replace(info(0, "ai_join", ["r1", "a1"], {"r1": 200, "a1": 3}), document="r1"),
               replace(info(1, "ai_join", ["r2", "a1"], {"r2": 200, "a1": 3}), document="r2"),
               replace(info(2, "ai_join", ["r2", "a2"], {"r2": 200, "a2": 3}), document="r2")],
              {"r1": 30, "a1": 4, "r2": 30, "a2": 4})
CHAIN = Candidate(("r1",), (JoinStep("a1", 0, "r1"), JoinStep("r2", 1, "r2"),
                            JoinStep("a2", 2, "r2")), 1.0, Work())


@pytest.mark.parametrize("carried,hands_off,expected", [
    # the first join takes the carry, #1 and #2 ride along its chunks; #1 and #2 share r2's
    ("r1", True, "r1 +a1 ai_join#0(anchor=r1) (takes the carry) (rides #1,#2) "
                 "+r2 ai_join#1(anchor=r2) (with #2's anchor chunks) (hands on r2) "
                 "+a2 ai_join#2(anchor=r2)"),
    # #1 takes r2's carried documents: it is not asked ahead with #2; the rows are read
    ("r2", False, "r1 +a1 ai_join#0(anchor=r1) (rides #1,#2) "
                  "+r2 ai_join#1(anchor=r2) (takes the carry) +a2 ai_join#2(anchor=r2)"),
])
def test_the_turns_of_a_chain(carried, hands_off, expected):
    program = join_program(CTX, CHAIN, RELATIONS, carried, hands_off)
    assert program.text() == expected
    assert [t.is_last for t in program.turns] == [False, False, True]
    assert program.rides == ((0, (1, 2)),)


def test_a_replanned_order_carries_its_own_turns_and_rides():
    """Re-planned after r2 and a2 are joined, the order left is a1 (through #1), then r1: join
    #0 may now ride along #1's chunks, judged from #1's rows; #1 hands #0 its a1 rows."""
    edges = (JoinEdge(0, "r1", "a1"), JoinEdge(1, "r2", "a1"), JoinEdge(2, "r2", "a2"))
    plan = PhysicalPlan(Scan("r1"), (), (CHAIN,), relations=RELATIONS, edges=edges, context=CTX)
    rows = {"r1": 30.0, "a1": 4.0, "r2": 30.0, "a2": 1.0}
    program = plan.replan_joins(rows, start=(frozenset({"r2", "a2"}), 12.0))
    assert program.text() == ("a2,r2 +a1 ai_join#1(anchor=r2) (rides #0) (hands on a1) "
                              "+r1 ai_join#0(anchor=r1)")
    (ride,) = program.turns[0].rides
    assert (ride.anchor, ride.partner, ride.joined) == ("r1", "a1", {"r2", "a2"})
    assert ride.steps == program.order.steps  # judged from the re-planned estimates
    assert not ride.estimate_first


@pytest.mark.parametrize("keyed,expected", [
    (None, (4,)),                   # #3 reads r1 and a1, which the last join (+a2) does not hold
    ({("a1", "a2"): 0.5}, (4, 5)),  # a key ties a1 to a2: the last join holds a1's rows too
])
def test_the_last_join_asks_the_projections_over_the_relations_it_holds(keyed, expected):
    ops = [*CTX.ops.values(), info(3, "ai_classify", ["r1", "a1"], {"r1": 200, "a1": 3}),
           info(4, "ai_classify", ["r2", "a2"], {"r2": 200, "a2": 3}),
           info(5, "ai_classify", ["a1", "a2"], {"a1": 3, "a2": 3})]
    ctx = context(ops, CTX.rows, pair_fraction=keyed)
    program = join_program(ctx, CHAIN, RELATIONS, projections=(3, 4, 5))
    assert [t.projections for t in program.turns] == [(), (), expected]
    assert program.pair_projections == expected
    assert program.text().endswith("(projects " + ",".join(f"#{op}" for op in expected) + ")")


def test_before_the_first_join_an_order_the_survivors_confirm_keeps_the_plans_turns():
    """The filters' re-plan returns the plan's own turns where the observed survivors leave
    the order as planned (its rides judged by the plan's estimates), else the new order's."""
    edges = (JoinEdge(0, "r1", "a1"), JoinEdge(1, "r2", "a1"), JoinEdge(2, "r2", "a2"))
    planned = {"r1": 30.0, "a1": 4.0, "r2": 30.0, "a2": 4.0}
    best, _, _ = choose_join(RELATIONS, edges, CTX, rows=planned)
    plan = with_strategy(PhysicalPlan(Scan("r1"), (), (best,), relations=RELATIONS,
                                      edges=edges, context=CTX))
    assert plan.replan_joins(planned) is plan.joins
    observed = plan.replan_joins({**planned, "a1": 1.0})  # one aspect survived: start there
    assert observed.text() == (
        "a1 +r2 ai_join#1(anchor=r2) (with #2's anchor chunks) (rides #0) "
        "+a2 ai_join#2(anchor=r2) (rides #0) (hands on a1) +r1 ai_join#0(anchor=r1)")


def test_explain_shows_what_the_second_to_last_join_hands_the_last():
    """Where nothing reads the joined rows, `quail explain` shows the handoff exec makes."""
    plan = with_strategy(PhysicalPlan(Scan("r1"), (), (CHAIN,), relations=RELATIONS,
                                      context=CTX))
    assert "join #1 hands join #2 its distinct r2 rows, weighted" in plan.strategy_lines()
    projected = replace(plan, steps=(Step("project", "", 3),))  # a projection reads them
    assert not any("hands" in line for line in with_strategy(projected).strategy_lines())


def test_each_turn_names_the_kv_lifetimes_of_its_anchor_chunks():
    """The plan, not the executor, says which chunks hold their documents past the join's call
    (where later joins ride along or projections ask the kept pairs), that each chunk's own KV
    is private, how the documents handed in pass (taken by a turn, shared by a pair asked
    ahead), and explain prints it per join."""
    program = join_program(CTX, CHAIN, RELATIONS, "r1", True)
    first, second, last = program.turns
    assert first.kv == ChunkKV(holds=True, private=True, handed=TAKE)  # #1, #2 ride along
    assert second.kv == ChunkKV() and second.ahead_kv == ChunkKV(handed=SHARE)  # paired
    assert last.kv.holds is False and last.ahead_kv is None
    assert program.star_kv is None  # a chain, no star
    assert first.kv_text() == ("join #0 chunk KV: held for rides/projections, private per "
                               "chunk, resident documents taken")
    assert second.kv_text() == ("join #1 chunk KV: private per chunk, resident documents taken; "
                                "ahead with #2: private per chunk, resident documents shared")
    ops = [*CTX.ops.values(), info(4, "ai_classify", ["r2", "a2"], {"r2": 200, "a2": 3})]
    projected = join_program(context(ops, CTX.rows), CHAIN, RELATIONS, projections=(4,))
    assert [t.kv.holds for t in projected.turns] == [True, False, True]  # the last projects


def test_a_star_shares_each_anchor_chunks_documents_between_its_joins():
    star = Candidate(("r",), (JoinStep("a1", 0, "r"), JoinStep("a2", 1, "r")), 1.0, Work())
    ctx = context([replace(info(0, "ai_join", ["r", "a1"], {"r": 200, "a1": 3}), document="r"),
                   replace(info(1, "ai_join", ["r", "a2"], {"r": 200, "a2": 3}), document="r")],
                  {"r": 30, "a1": 4, "a2": 4})
    program = join_program(ctx, star, ("r", "a1", "a2"))
    assert program.star_kv == ChunkKV(handed=SHARE)
