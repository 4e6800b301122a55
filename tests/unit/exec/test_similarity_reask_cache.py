"""A similarity's close call re-asked at the reference precision (OpRunner.answer_reference,
through BatchPipeline.ask_reference) replaces both directions in the answer cache, so a later
query that reads those directions gets the reference's PMIs, not the faster precision's."""

import pytest
from test_similarity_directions import DirectionEngine, answer, pmi, runner, similarity

from quail_engine.exec.sql_values import similarity_value
from quail_engine.infer.reask import Band, ReaskingEngine
from quail_engine.sql.ir import AiOp


def test_reasked_directions_are_cached_as_the_references(tmp_path):
    near = ("a" * 20, "bb")
    mean = (pmi(*near) + pmi(*near[::-1])) / 2
    op = similarity(thresholds=(similarity_value(similarity(), mean),))
    fast = DirectionEngine()
    reference = DirectionEngine(shift=0.25, like=fast)
    cache = tmp_path / "answers.sqlite"
    first = runner(ReaskingEngine(fast, lambda: reference, Band(0.1, 0.1, 0.5)), cache)
    answer(first, op, [near])
    assert sorted(reference.asked) == sorted([near, near[::-1]])

    # another range over the same texts: a new value, its directions read from the cache
    other = AiOp("ai_similarity", op.template, op.bindings, task_args=(("range", "0..1"),),
                 output_type="DOUBLE")
    later = DirectionEngine()
    assert answer(runner(later, cache), other, [near]) == [
        pytest.approx(similarity_value(other, mean + 0.25))]
    assert later.asked == []
