"""Whether a later join rides along an earlier join's resident anchor chunks (plan/riding.py):
the share of its pairs it is expected to ask at its turn, and the decision taken at each chunk
from the rows the earlier join kept so far."""

import math
from dataclasses import replace

import pytest
from plan_fakes import context, info

from quail_engine.plan.cost import Work
from quail_engine.plan.join_order import Candidate, JoinStep
from quail_engine.plan.join_program import join_program
from quail_engine.plan.riding import (
    PlannedRide,
    RideSeen,
    dropped_rides,
    is_ride_worth,
    kept_rows,
    ride_partners,
    ride_reach,
)


def test_the_reach_of_a_riding_join_follows_the_joins_before_its_turn():
    """A relation brought in or already joined keeps
    1 - exp(-rows out / its rows) of its rows through each join before the riding join's turn;
    the riding join asks all it has; a relation nothing brings in gives no reach."""
    cur = {"r1"}
    rows = {"r2": 5000, "a2": 12, "a1": 12}
    first = JoinStep("a1", op=0, anchor="r1", rows_out=17559.0)

    def chain(r2_rows_out: float):
        return [first, JoinStep("r2", op=1, anchor="r2", rows_out=r2_rows_out),
                JoinStep("a2", op=2, anchor="r2", rows_out=1e6)]

    # QUAIL-B IMDB-9: ~25 M rows out of the join that brings r2 in; every review survives it
    assert ride_reach(("r2", "a2"), chain(2.5e7), cur, rows) > 0.99
    # a selective join in between: 500 rows over 5,000 reviews keep ~9.5% of them
    assert abs(ride_reach(("r2", "a2"), chain(500.0), cur, rows) - (1 - math.exp(-0.1))) < 1e-9
    # the join that brings r2 in, riding: all of r2's candidates; a1 kept by the first join
    assert ride_reach(("r2", "a1"), chain(500.0)[:2], cur, rows) > 0.99
    # a relation already joined (FEV-7's claims): the first join keeps 1 - exp(-321 / 500)
    claims = {"c"}
    steps = [JoinStep("e", op=0, anchor="e", rows_out=321.0),
             JoinStep("e2", op=1, anchor="e2", rows_out=300.0)]
    reach = ride_reach(("e2", "c"), steps, claims, {"e2": 287, "c": 500})
    assert abs(reach - (1 - math.exp(-321 / 500))) < 1e-9
    assert ride_reach(("r3", "a2"), chain(500.0), cur, rows) == 0.0


@pytest.mark.parametrize("asked,passed,rows_in,before,expected", [
    (0, 0, 1000.0, 0.0, 0.0), (10, 5, 1000.0, 0.0, 500.0), (100, 0, 1000.0, 0.0, 0.0),
    (0, 0, 1000.0, 42.0, 42.0), (10, 5, 1000.0, 42.0, 500.0)])
def test_kept_rows(asked, passed, rows_in, before, expected):
    assert kept_rows(asked, passed, rows_in, before) == expected


# FEV-7's shape: claims c joined; evidence e, then e2 (riding), each read with the claims
STEPS = [JoinStep("e", op=0, anchor="e", rows_out=0.0),
         JoinStep("e2", op=1, anchor="e2", rows_out=300.0)]


@pytest.mark.parametrize("kept,documents,expected", [
    (321.0, 287 * 1000, True),  # the first join keeps many claims: long documents ride
    (0.0, 287 * 1000, False),   # it keeps none: the riding join would ask for nothing
    (321.0, 10, False),         # short documents: the questions it may waste weigh more
])
def test_a_join_rides_when_its_documents_outweigh_the_questions_it_may_waste(
        kept, documents, expected):
    assert is_ride_worth(("e2", "c"), STEPS, {"c"}, {"e2": 287, "c": 500}, kept, documents,
                         500 * 50, 1) is expected


def _chain(second_aliases=("r2", "a2"), keyed=None, shares=True):
    """reviews r1 - aspects a1 - reviews r2 - aspects a2 (IMDB-10's chain), joins #0-#2."""
    ops = [info(0, "ai_join", ["r1", "a1"], {"r1": 200, "a1": 3}),
           info(1, "ai_join", ["r2", "a1"], {"r2": 200, "a1": 3}),
           replace(info(2, "ai_join", list(second_aliases), dict.fromkeys(second_aliases, 3)),
                   shares_document=shares)]
    return context(ops, dict.fromkeys(("r1", "a1", "r2", "a2"), 10.0), pair_fraction=keyed)


FIRST = JoinStep("a1", 0, "r1")
LATER = [JoinStep("r2", 1, "r2"), JoinStep("a2", 2, "r2")]


@pytest.mark.parametrize("ctx,expected", [
    (_chain(), [(0, "r2", "a1"), (1, "r2", "a2")]),       # both later joins anchored on r2
    (_chain(("r2", "a2", "a1")), [(0, "r2", "a1")]),      # the last reads three relations
    (_chain(keyed={("a2", "r2"): 0.5}), []),               # a key ties r2 to a2: no pairs known
    (_chain(shares=False), [(0, "r2", "a1")]),            # the last shares no document
])
def test_the_later_joins_that_may_ride_along_a_joins_chunks(ctx, expected):
    assert ride_partners(ctx, FIRST, LATER, {"r1"}) == expected


def _cand(first: JoinStep, start=("r1",)) -> Candidate:
    return Candidate(tuple(start), (first, *LATER), 0.0, Work())


@pytest.mark.parametrize("ctx,cand,carried,expected", [
    (_chain(), _cand(FIRST), "r1", (1, 2)),          # r2 reads the reviews r1's filters drop
    (_chain(), _cand(FIRST), "a1", ()),              # the first join takes no carry from a1
    (_chain(keyed={("a2", "r2"): 0.5}), _cand(FIRST), "r1", ()),  # no pairs known then
    (_chain(("r2", "r1")), _cand(FIRST), "r1", (1,)),  # #2's partner is the carried r1
    (_chain(), None, "r1", ()),
])
def test_the_joins_that_ride_over_the_documents_the_carried_filters_drop(
        ctx, cand, carried, expected):
    rides = dropped_rides(ctx, cand, carried)
    assert tuple(r.op for r in rides) == expected
    assert all(r.estimate_first and r.steps[0] == FIRST and r.joined == {"r1"} for r in rides)


@pytest.mark.parametrize("ctx,cand,expected", [
    (_chain(), _cand(FIRST), ((0, (1, 2)),)),                   # both ride along join #0
    (_chain(("r2", "a2", "a1")), _cand(FIRST), ((0, (1,)),)),  # the last reads three
    (_chain(), _cand(JoinStep("a1", 0, None)), ()),            # join #0 has no anchor chunks
    (_chain(), None, ()),
])
def test_the_plan_names_the_joins_that_may_ride_along_each_joins_chunks(ctx, cand, expected):
    program = join_program(ctx, cand, ("r1", "a1", "r2", "a2"))
    assert (program.rides if program is not None else ()) == expected


def test_a_planned_ride_is_judged_from_the_rows_its_join_kept_so_far():
    """At each chunk the plan decides from what the executor observed: a ride along a join's
    chunks waits for that join's first answers; one over the documents the filters drop is
    judged by the plan's estimate until then; both follow the rows kept once there are
    answers (FEV-7's shape, as above)."""
    first = replace(STEPS[0], rows_in=1000.0, rows_out=321.0)
    ride = PlannedRide(1, "e2", "c", (first, STEPS[1]), frozenset({"c"}))
    seen = RideSeen({"e2": 287, "c": 500}, 287 * 1000, 500 * 50, 1)
    assert not ride.is_worth(seen, 0, 0)                 # nothing answered yet
    assert ride.is_worth(seen, 100, 33)                  # ~330 rows kept: as with 321 above
    assert not ride.is_worth(seen, 100, 0)               # none kept
    early = replace(ride, estimate_first=True)
    assert early.is_worth(seen, 0, 0)                    # the estimate: 321 rows
    assert not early.is_worth(seen, 100, 0)
