"""After a re-plan the executor asks the rides the re-planned program names, and only those
(plan/join_program.py: each turn carries its rides, decided in plan/ from the rows observed;
exec/join_runner.run_joins interprets them)."""

from dataclasses import dataclass, replace

from exec_fakes import FakeEngine
from test_join_chain import DISCUSS, SQL, _db

from quail_engine.exec import anchor_chunks
from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec
from quail_engine.plan.physical import PhysicalPlan
from quail_engine.plan.riding import PlannedRide

POSITIVE = ("AI_FILTER(PROMPT('Is the review {0} POSITIVE about the aspect {1}?', "
            "r2.review, a2.name))")
# the chain r1 - a1 - r2 - a2 with a filter on a2: the plan starts at r2, joins a2 (#2), a1
# (#1), then r1 (#0); join #0 may ride along #2's and, re-planned after #2, along #1's chunks
QUERY = SQL.replace(DISCUSS.replace("R.", "r2.").replace("A.", "a2."), POSITIVE).replace(
    "ORDER BY", "WHERE AI_FILTER(PROMPT('Is {0} the aspect called music?', a2.name)) ORDER BY")


REPLAN, ASK_RIDING = PhysicalPlan.replan_joins, anchor_chunks.ask_riding


@dataclass(frozen=True)
class AlwaysRides(PlannedRide):
    """A ride the plan decides to take at every chunk (the rows kept aside)."""

    def is_worth(self, seen, asked, passed) -> bool:
        return True


def _run(monkeypatch, rides_of):
    """The query's rows, the re-planned programs, and (riding join, join it rode along) for
    each ride the executor asked; `rides_of(turn)`: the rides a re-planned turn names."""
    programs = []

    def replan(self, rows, start=None, carried=None):
        program = REPLAN(self, rows, start=start, carried=carried)
        if start is None or program is None:
            return program  # (the filters' re-plan keeps the plan's order here)
        program = replace(program, turns=tuple(replace(t, rides=rides_of(t))
                                               for t in program.turns))
        programs.append(program)
        return program

    asked = []

    def spying(ride, *args):
        asked.append((ride.op_id, ride.planned.steps[0].op))
        return ASK_RIDING(ride, *args)

    monkeypatch.setattr(PhysicalPlan, "replan_joins", replan)
    monkeypatch.setattr(anchor_chunks, "ask_riding", spying)
    session = QuailSession(_db(), FakeEngine, device_spec=DeviceSpec("toy", 1e11, 2e10))
    rows = session.execute(QUERY, "snowflake").to_pylist()
    return rows, programs, asked, session.report


def test_after_a_replan_exec_asks_exactly_the_rides_the_replanned_plan_names(monkeypatch):
    plain, _, _, report = _run(monkeypatch, lambda t: ())
    assert "ride #0 with join #1's anchor chunks" in report.plans[0].splitlines()

    def always(turn):
        return tuple(AlwaysRides(**vars(r)) for r in turn.rides)

    rows, programs, asked, report = _run(monkeypatch, always)
    named = {(r.op, t.step.op) for p in programs for t in p.turns for r in t.rides}
    first = {(0, 2)}  # the plan's own first turn: join #0 along #2, judged as planned
    assert named == {(0, 1)}, [p.text() for p in programs]
    assert set(asked) - first == named
    assert rows == plain and rows
    assert not [r for r in report.remarks if r.startswith("re-planned")]  # as planned


    # the same re-planned turns without their rides: nothing rides along them, and the
    # report shows the turns exec took instead of the plan's (`quail explain --analyze`)
    _, stripped, asked, report = _run(monkeypatch, lambda t: ())
    assert stripped and not any(t.rides for p in stripped for t in p.turns)
    assert not set(asked) - first
    remark = next(r for r in report.remarks if r.startswith("re-planned after joining a2,r2"))
    assert remark.endswith(": a2,r2 +a1 ai_join#1(anchor=r2) (hands on a1) "
                           "+r1 ai_join#0(anchor=r1)"), remark
