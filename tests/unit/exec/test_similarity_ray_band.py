"""The re-ask band through Ray replicas (quail_engine/replicas): the driver's RayEngine shows the
executor what one banded engine does (its `band`, `ask_reference`, `reasked`), so a
similarity's close call is re-asked at the reference precision on the workers as it is in one
process (exec/multi_request._reask_close). Ray itself is replaced by a stand-in that calls
the actors in process: the driver's routing and the workers' code run as they are."""

from __future__ import annotations

import pytest
from test_similarity_directions import DirectionEngine, answer, pmi, similarity

from quail_engine.errors import ExecutionError
from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.report import Report
from quail_engine.exec.sql_values import similarity_value
from quail_engine.infer.api import Request, SpanReadout
from quail_engine.infer.reask import Band, ReaskingEngine
from quail_engine.replicas.ray_engine import RayEngine
from quail_testing.ray_fakes import fake_replicas

BAND = Band(boolean=0.1, label=0.1, span=0.5)


def replicas(monkeypatch, engines) -> RayEngine:
    """A RayEngine over one banded worker per engine of `engines`."""
    return fake_replicas(monkeypatch, engines, "bf16-band")


def banded(tok: DirectionEngine) -> tuple[ReaskingEngine, DirectionEngine, DirectionEngine]:
    """A worker's banded engine; its fast and reference engines read `tok`'s token ids (the
    reference's margins shifted by 0.01, so its answers are told apart)."""
    fast, reference = DirectionEngine(like=tok), DirectionEngine(shift=0.01, like=tok)
    return ReaskingEngine(fast, lambda: reference, BAND), fast, reference


def test_the_driver_shows_the_workers_band_and_routes_reference_asks_to_them(monkeypatch):
    tok = DirectionEngine()
    workers = [banded(tok) for _ in range(2)]
    engine = replicas(monkeypatch, [w[0] for w in workers])
    assert engine.band == BAND
    readout = SpanReadout("Answer:", 0.0, "Text: N/A", thresholds=())
    texts = [f"Text: doc{i} {'x ' * i}Question: Answer: span{i}" for i in range(6)]
    requests = [Request(tuple(ids), readout) for ids in tok.tokenize(texts)]
    answers = engine.ask_reference(requests)
    asked = [d for _, _, reference in workers for d in reference.asked]
    assert sorted(asked) == sorted((f"doc{i} {'x ' * i}".strip(), f"span{i}") for i in range(6))
    assert all(reference.asked for _, _, reference in workers)  # shared by both workers
    assert [a.margin for a in answers] == [pmi(*d) + 0.01 for d in (
        (f"doc{i} {'x ' * i}".strip(), f"span{i}") for i in range(6))]
    assert not any(fast.asked for _, fast, _ in workers)
    assert engine.reasked == 6


def test_without_a_band_there_is_no_reference_to_ask(monkeypatch):
    engine = replicas(monkeypatch, [DirectionEngine(), DirectionEngine()])
    assert engine.band is None and engine.reasked == 0
    with pytest.raises(ExecutionError, match="no re-ask band"):
        engine.ask_reference([Request((1, 2), SpanReadout("Answer:", 0.0, "Text: N/A"))])


def test_a_similaritys_close_call_is_reasked_on_the_workers_reference(monkeypatch):
    """As tests/unit/exec/test_similarity_directions.py's single-engine case: a mean near the
    SQL's number has both directions answered by the reference precision, here on the Ray
    workers; a row whose mean is far is the fast precision's."""
    near, far = ("a" * 20, "bb"), ("cccc", "dddd")
    mean_near = (pmi(*near) + pmi(*near[::-1])) / 2
    op = similarity(thresholds=(similarity_value(similarity(), mean_near),))
    tok = DirectionEngine()
    workers = [banded(tok) for _ in range(2)]
    engine = replicas(monkeypatch, [w[0] for w in workers])
    run = OpRunner(engine, AnswerCache(None), Report(),
                   text=PromptText(lambda: tok, "identity", model_name="default"))
    values = answer(run, op, [near, far])
    reasked = sorted(d for _, _, reference in workers for d in reference.asked)
    assert reasked == sorted([near, near[::-1]])
    assert values[0] == pytest.approx(similarity_value(op, mean_near + 0.01))
    assert values[1] == similarity_value(op, (pmi(*far) + pmi(*far[::-1])) / 2)
    assert run.report.op(0, "ai_similarity").reasked == 2
