"""Multi-label classification: one decision per label over the document's shared prefix, the
labels decided yes gathered per row (exec/multi_request.answer_labels)."""

import pytest
from exec_fakes import FakeEngine

from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.prompts import MULTI_LABEL_THRESHOLD, OpPrompt
from quail_engine.exec.report import Report
from quail_engine.infer.api import Answer, BooleanReadout, LabelReadout, SpanReadout
from quail_engine.infer.prompt_layout import document_text
from quail_engine.sql import parse
from quail_engine.sql.ir import AiOp, Binding, Label

LABELS = ("price", "quality", "delivery")
MULTI = AiOp("ai_classify", "{0}", (Binding(0, "r.review", "r", "review"),),
             labels=tuple(Label(x) for x in LABELS), multi=True, output_type="VARCHAR[]")


class LabelEngine(FakeEngine):
    """Says yes to a label decision when the label's name is a word of the document; records
    every request's (document prefix, own text, readout)."""

    def __init__(self):
        super().__init__()
        self.asked: list[tuple[str, str, object]] = []

    def run(self, requests):
        self.calls += 1
        out = []
        for r in requests:
            doc = " ".join(self.words[i] for i in self.prefixes[r.prefix.id]) if r.prefix else ""
            own = " ".join(self.words[i] for i in r.tokens)
            self.asked.append((doc, own, r.readout))
            label = own.split("Answer:")[-1].replace("<assistant>", "").strip()
            if isinstance(r.readout, BooleanReadout):
                label = own.split("'")[1]
            yes = label.lower() in doc.lower()
            out.append(Answer(yes, 1.0 if yes else 0.0, 1.0 if yes else -1.0))
        return out


def runner(engine, model="default", cache=None):
    text = PromptText(lambda: engine, "identity", model_name=model)
    return OpRunner(engine, cache or AnswerCache(None), Report(), text=text)


def test_a_multi_label_op_is_asked_one_decision_per_label():
    layout = OpPrompt.for_op(MULTI).decisions()
    prefix, suffix = layout.texts(("fair price, slow delivery", "delivery"))
    assert prefix == document_text("fair price, slow delivery")
    assert suffix.endswith("Does the text above mention\nAnswer: delivery")
    readout = layout.readout()
    assert isinstance(readout, SpanReadout) and readout.threshold == MULTI_LABEL_THRESHOLD
    yes_no = OpPrompt.for_op(MULTI, pair=False).decisions()
    assert "Does the label 'delivery' apply to the text above?" in yes_no.texts(("d", "delivery"))[1]
    assert isinstance(yes_no.readout(), BooleanReadout)


def test_single_label_classification_is_unchanged():
    single = AiOp("ai_classify", "{0}", MULTI.bindings, labels=MULTI.labels)
    layout = OpPrompt.for_op(single)
    assert not layout.is_multi_label
    assert isinstance(layout.readout(), LabelReadout)


@pytest.mark.parametrize("model", ["default", "/models/Qwen3-4B"])
def test_rows_get_every_label_decided_yes_and_an_empty_list_for_none(model):
    engine = LabelEngine()
    rows = [("fair price but slow delivery",), ("nothing to say",), (None,), ("",),
            ("price price quality",)]
    run = runner(engine, model)
    got = run.answer(0, run.layout(MULTI), rows)
    assert got == [["price", "delivery"], [], None, None, ["price", "quality"]]
    # each document's KV computed once (the three non-NULL rows), its labels asked over it
    assert len(engine.prefixes) == 3
    assert len(engine.asked) == 3 * len(LABELS)


def test_yes_no_decisions_are_calibrated_per_label():
    engine = LabelEngine()
    run = runner(engine, "/models/Qwen3-4B")
    run.answer(0, run.layout(MULTI), [("price",)])
    calibrations = {ro.calibration_tokens for _, _, ro in engine.asked}
    assert len(calibrations) == len(LABELS) and None not in calibrations


def test_each_label_decision_caches_by_itself(tmp_path):
    cache = AnswerCache.in_dir(tmp_path)
    engine = LabelEngine()
    run = runner(engine, cache=cache)
    assert run.answer(0, run.layout(MULTI), [("fair price",)]) == [["price"]]
    more = AiOp("ai_classify", "{0}", MULTI.bindings, multi=True, output_type="VARCHAR[]",
                labels=(*MULTI.labels, Label("service")))
    engine.asked.clear()
    assert run.answer(0, run.layout(more), [("fair price",)]) == [["price"]]
    assert [own.split()[-2] for _, own, _ in engine.asked] == ["service"]  # only the new label


@pytest.mark.parametrize("dialect,sql,expected", [
    ("snowflake", "SELECT id, f.value::string AS label FROM docs, LATERAL FLATTEN(input => "
                  "AI_CLASSIFY(body, ['a', 'b'], {'output_mode': 'multi'}):labels) f",
     "SELECT id, CAST(f.value AS TEXT) AS label FROM docs JOIN UNNEST(quail_ai_0(body)) AS "
     "f(value) ON TRUE"),
    ("snowflake", "SELECT value FROM docs, LATERAL FLATTEN(AI_CLASSIFY(body, ['a', 'b'], "
                  "{'output_mode': 'multi'}):labels)",
     "SELECT value FROM docs JOIN UNNEST(quail_ai_0(body)) AS _flattened(value) ON TRUE"),
    ("bigquery", "SELECT id, label FROM docs, UNNEST(AI.CLASSIFY(body, ['a', 'b'], "
                 "output_mode => 'multi')) AS label",
     "SELECT id, label FROM docs CROSS JOIN UNNEST(quail_ai_0(body)) AS _t0(label)"),
    ("databricks", "SELECT id, explode(from_json(ai_classify(body, '[\"a\", \"b\"]', "
                   "map('multilabel', 'true')):response, 'array<string>')) AS label FROM docs",
     "SELECT id, UNNEST(quail_ai_0(body)) AS label FROM docs"),
])
def test_unnesting_idioms_unnest_the_label_list(dialect, sql, expected):
    parsed = parse(sql, dialect)
    assert parsed.duckdb_sql == expected
    assert parsed.ai_ops[0].multi and parsed.ai_ops[0].output_type == "VARCHAR[]"
