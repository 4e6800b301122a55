"""The plan's estimate of an operator is its kind's prompts per row (OpSpec.num_requests) times
one prompt's work: AI_SIMILARITY asks each row in both directions and reads their second texts
after a content-free document (about one prompt more a row), so over the same rows and tokens
its estimated work (and time) is three times a one-prompt operator's."""

import pytest
from plan_fakes import Core, Rel, context, info

from quail_engine.plan.planner import plan_core
from quail_engine.sql.ir import AiOp, Binding
from quail_engine.sql.op_kinds import OpKind, spec


def _projection_step(kind: str):
    """The project step of `SELECT <kind>(r.a, r.b) FROM r` over 400 rows of 60 tokens."""
    bindings = (Binding(0, "r.a", "r", "a"), Binding(1, "r.b", "r", "b"))
    core = Core((Rel("r", columns=("b_0_0", "b_0_1")),), projections=(0,))
    ops = [AiOp(kind, "{0} {1}", bindings, output_type="DOUBLE")]
    ctx = context([info(0, kind, ["r"], {"r": 60.0}, doc="r.a", question=12.0)], {"r": 400})
    return next(s for s in plan_core(core, ops, ctx).steps if s.kind == "project")


def test_similarity_is_two_prompts_and_their_references_per_row():
    similarity = spec(OpKind.AI_SIMILARITY)
    assert (similarity.num_asks, similarity.num_references, similarity.num_requests) == (2, 1, 3)
    assert {spec(k).num_requests for k in OpKind if k != OpKind.AI_SIMILARITY} == {1}


def test_a_similarity_projection_is_estimated_at_three_times_a_one_prompt_operator():
    one, similarity = _projection_step("ai_score"), _projection_step("ai_similarity")
    assert one.work.fresh_tokens > 0
    assert similarity.work.as_tuple() == pytest.approx(one.work.scaled(3).as_tuple())
    assert similarity.est_seconds == pytest.approx(3 * one.est_seconds, rel=0.05)
    assert similarity.rows_out == one.rows_out == 400
