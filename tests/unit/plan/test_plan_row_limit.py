"""Where the statement's LIMIT binds a core and where its projections run (plan/row_limit.py),
and the lines `quail explain` prints for them."""

import pytest
from plan_fakes import Core, Rel, context, filter_op, info, join_op

from quail_engine.plan.planner import plan_core
from quail_engine.plan.row_limit import (
    PROJECT_AFTER_JOINS,
    PROJECT_LIMITED,
    PROJECT_STATEMENT,
    PROJECT_WITH_FILTERS,
    RowLimit,
    core_limit,
    projections_at,
)

UNORDERED, ORDERED = RowLimit(5, False), RowLimit(5, True)

CORE_LIMIT_CASES = [
    # (limit, cores in the statement, relations, has joins) -> the core's limit
    (UNORDERED, 1, 1, False, UNORDERED),
    (ORDERED, 1, 1, False, ORDERED),
    (UNORDERED, 2, 1, False, None),   # another core's rows reach the statement too
    (UNORDERED, 1, 2, False, None),   # a join of relations: its rows are not one scan's
    (UNORDERED, 1, 1, True, None),
    (None, 1, 1, False, None),
]


@pytest.mark.parametrize("limit,cores,relations,joins,expected", CORE_LIMIT_CASES)
def test_core_limit(limit, cores, relations, joins, expected):
    assert core_limit(limit, cores, relations, joins) == expected


PROJECTIONS_AT_CASES = [
    # (core's limit, has joins, joins all inner) -> where the projections run
    (None, False, True, PROJECT_WITH_FILTERS),
    (UNORDERED, False, True, PROJECT_LIMITED),
    (ORDERED, False, True, PROJECT_STATEMENT),
    (None, True, True, PROJECT_AFTER_JOINS),
    (None, True, False, PROJECT_STATEMENT),
]


@pytest.mark.parametrize("limit,joins,inner,expected", PROJECTIONS_AT_CASES)
def test_projections_at(limit, joins, inner, expected):
    assert projections_at(limit, joins, inner) == expected


def _filter_project_plan(limit, num_cores=1):
    core = Core((Rel("r", columns=("b_0_0", "b_1_0")),), filters=(0,), projections=(1,))
    ai_ops = [filter_op("r", "review"), filter_op("r", "review")]
    ops = [info(0, "ai_filter", ["r"], {"r": 120}, sel=0.5, doc="r.review"),
           info(1, "ai_classify", ["r"], {"r": 120}, doc="r.review")]
    return plan_core(core, ai_ops, context(ops, {"r": 200}), limit, num_cores)


def test_unordered_limit_stops_the_filters_and_projects_those_rows():
    plan = _filter_project_plan(UNORDERED)
    assert (plan.limit, plan.projections_at) == (UNORDERED, PROJECT_LIMITED)
    assert plan.text().splitlines()[-1] == (
        "limit 5: the filters stop once 5 rows pass; projections over those rows")


def test_limit_of_a_statement_of_several_cores_binds_no_core():
    plan = _filter_project_plan(UNORDERED, num_cores=2)
    assert (plan.limit, plan.projections_at) == (None, PROJECT_WITH_FILTERS)
    assert not any(line.startswith("limit") for line in plan.text().splitlines())


def test_limit_over_a_join_binds_no_core():
    core = Core((Rel("r", columns=("b_0_0",)), Rel("p", columns=("b_0_1",))), joins=(0,))
    ops = [info(0, "ai_join", ["r", "p"], {"r": 100, "p": 20}, sel=0.1)]
    plan = plan_core(core, [join_op("r", "review", "p", "name")],
                     context(ops, {"r": 100, "p": 10}), UNORDERED)
    assert (plan.limit, plan.projections_at) == (None, PROJECT_AFTER_JOINS)
