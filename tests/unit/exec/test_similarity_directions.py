"""AI_SIMILARITY asked in both directions (exec/multi_request.answer_similarity): each row's
texts read each after the other, the value the mean of the two PMIs through the curve, so
exchanging the arguments gives the same number; the re-ask band decides on that mean."""

import pytest
from exec_fakes import FakeEngine

from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.prompts import OpPrompt
from quail_engine.exec.report import Report
from quail_engine.exec.sql_values import similarity_margin, similarity_value
from quail_engine.infer.api import Answer, SpanReadout
from quail_engine.infer.reask import Band, ReaskingEngine
from quail_engine.sql.ir import AiOp, Binding

BINDINGS = (Binding(0, "t.a", "t", "a"), Binding(1, "t.b", "t", "b"))


def similarity(template="{0}\n{1}", thresholds=()) -> AiOp:
    return AiOp("ai_similarity", template, BINDINGS, task_args=(("range", "-1..1"),),
                output_type="DOUBLE", thresholds=thresholds)


def pmi(first: str, second: str) -> float:
    """The fake's margin of `second` read after `first`: deliberately not symmetric."""
    return 0.1 * len(first) - 0.3 * len(second)


class DirectionEngine(FakeEngine):
    """Answers a similarity request with pmi(document, span) + `shift`; records each (document,
    span) it was asked. `like`: an engine whose tokenizer this one shares (a reference
    precision's engine reads the fast one's token ids)."""

    def __init__(self, shift: float = 0.0, like: FakeEngine | None = None):
        super().__init__()
        if like is not None:
            self.vocab, self.words = like.vocab, like.words
        self.shift = shift
        self.asked: list[tuple[str, str]] = []

    def run(self, requests):
        self.calls += 1
        out = []
        for r in requests:
            assert isinstance(r.readout, SpanReadout) and r.readout.thresholds == ()
            text = " ".join(self.words[i] for i in r.tokens)
            doc = text.split("Text:")[1].split("Question:")[0].strip()
            span = text.split("Answer:")[1].replace("<assistant>", "").strip()
            self.asked.append((doc, span))
            out.append(Answer(False, 0.0, pmi(doc, span) + self.shift))
        return out


def runner(engine, cache=None) -> OpRunner:
    text = PromptText(lambda: engine, "identity", model_name="default")
    return OpRunner(engine, AnswerCache(cache), Report(), text=text)


def answer(run: OpRunner, op: AiOp, rows) -> list:
    return run.answer(0, run.layout(op), rows)


def test_each_row_is_asked_in_both_directions_and_the_value_is_their_mean():
    engine = DirectionEngine()
    rows = [("lamp", "a bright lamp"), ("refund", None), ("shoes", "")]
    values = answer(runner(engine), similarity(), rows)
    assert sorted(engine.asked) == sorted([("lamp", "a bright lamp"), ("a bright lamp", "lamp")])
    mean = (pmi("lamp", "a bright lamp") + pmi("a bright lamp", "lamp")) / 2
    assert values == [similarity_value(similarity(), mean), None, None]


@pytest.mark.parametrize("template", ["{0}\n{1}", "{1} and {0}"])
def test_exchanging_the_arguments_gives_the_same_value(template):
    rows = [("lamp", "a bright lamp"), ("The battery dies.", "It runs out fast"), ("x", "x")]
    ab = answer(runner(DirectionEngine()), similarity(template), rows)
    ba = answer(runner(DirectionEngine()), similarity(template), [(b, a) for a, b in rows])
    assert ab == ba
    assert len(set(ab)) == 3  # the fake's directions differ, so the rows do too


def test_one_text_twice_is_one_prompt_asked_both_ways():
    engine = DirectionEngine()
    op = AiOp("ai_similarity", "{0}\n{0}", BINDINGS[:1], task_args=(("range", "0..1"),),
              output_type="DOUBLE")
    assert answer(runner(engine), op, [("lamp",)]) == [similarity_value(op, pmi("lamp", "lamp"))]
    assert engine.asked == [("lamp", "lamp"), ("lamp", "lamp")]


def test_a_direction_is_cached_whatever_range_the_sql_maps_the_mean_onto(tmp_path):
    engine = DirectionEngine()
    run = runner(engine, tmp_path / "answers.sqlite")
    rows = [("lamp", "a bright lamp")]
    answer(run, similarity(), rows)
    databricks = AiOp("ai_similarity", "{1}\n{0}", BINDINGS, task_args=(("range", "0..1"),),
                      output_type="DOUBLE")
    mean = (pmi("lamp", "a bright lamp") + pmi("a bright lamp", "lamp")) / 2
    assert answer(run, databricks, rows) == [similarity_value(databricks, mean)]
    assert len(engine.asked) == 2  # the second call's directions came from the answer cache


def test_a_mean_near_the_sqls_number_is_reasked_both_directions():
    """Far from the number in each direction, near it on average: the band re-asks both
    directions at the reference precision; a row whose mean is far is the fast engine's."""
    near, far = ("a" * 20, "bb"), ("cccc", "dddd")
    mean_near = (pmi(*near) + pmi(*near[::-1])) / 2
    op = similarity(thresholds=(similarity_value(similarity(), mean_near),))
    assert similarity_margin(op, op.thresholds[0]) == pytest.approx(mean_near)
    band = Band(boolean=0.1, label=0.1, span=0.5)
    assert all(abs(pmi(*d) - mean_near) > band.span for d in (near, near[::-1]))
    fast = DirectionEngine()
    reference = DirectionEngine(shift=0.01, like=fast)
    run = runner(ReaskingEngine(fast, lambda: reference, band))
    values = answer(run, op, [near, far])
    assert sorted(reference.asked) == sorted([near, near[::-1]])
    assert values[0] == pytest.approx(similarity_value(op, mean_near + 0.01))
    mean_far = (pmi(*far) + pmi(*far[::-1])) / 2
    assert values[1] == similarity_value(op, mean_far)
    assert run.report.op(0, "ai_similarity").reasked == 2


class UnloadedRunner(OpRunner):
    """A session's runner whose model is not loaded: touching the engine fails the test."""

    @property
    def engine(self):
        raise AssertionError("the model was loaded")

    @engine.setter
    def engine(self, value) -> None:
        pass

    def loaded_engine(self):
        return None


def test_a_value_asked_before_needs_neither_the_model_nor_its_band(tmp_path):
    """With the SQL's number (a banded precision would need the model for its band), the
    second run of the same rows reads its values back, the model never loaded."""
    op = similarity(thresholds=(0.5,))
    engine, cache = DirectionEngine(), tmp_path / "answers.sqlite"
    text = PromptText(lambda: engine, "identity", model_name="default")
    first = OpRunner(engine, AnswerCache(cache), Report(), text=text, precision="bf16-band")
    rows = [("lamp", "a bright lamp"), ("shoes", None)]
    values = answer(first, op, rows)
    again = UnloadedRunner(None, AnswerCache(cache), Report(), text=text, precision="bf16-band")
    assert answer(again, op, rows) == values and values[0] is not None
    assert again.report.op(0, "ai_similarity").cache_hits == 1


def test_without_a_number_to_compare_nothing_is_reasked():
    fast, reference = DirectionEngine(), DirectionEngine(shift=0.01)
    run = runner(ReaskingEngine(fast, lambda: reference, Band(0.1, 0.1, 100.0)))
    answer(run, similarity(), [("lamp", "a bright lamp")])
    assert reference.asked == []


def test_a_direction_is_one_layouts_value_not_the_sqls():
    layout = OpPrompt.for_op(similarity(thresholds=(0.5,)))
    one = layout.directions()
    assert layout.is_similarity and not one.is_similarity
    assert layout.readout().thresholds and one.readout().thresholds == ()
    assert one.sql_value(Answer(False, 0.0, -2.5)) == -2.5
    assert one.value_shape() != layout.value_shape()
    assert layout.swapped(("a", "b")) == ("b", "a")
