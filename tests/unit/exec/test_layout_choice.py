"""Two-argument questions use the pair layout only with the model it was measured on."""

import pytest
from exec_fakes import ajoin

from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.report import Report
from quail_engine.infer.api import BooleanReadout, SpanReadout


@pytest.mark.parametrize("model,readout", [
    ("default", SpanReadout), ("gemma3-270m", SpanReadout), ("default@fp8", SpanReadout),
    ("smollm2-135m", BooleanReadout), ("/models/Qwen3-4B", BooleanReadout)])
def test_pair_layout_only_on_the_default_model(model, readout):
    text = PromptText(lambda: None, "identity", model_name=model)
    runner = OpRunner(None, AnswerCache(None), Report(), text=text, calibrate=False)
    layout = runner.layout(ajoin())
    assert isinstance(layout.readout(), readout)
    prefix, suffix = layout.texts(("great battery", "battery"))
    assert "great battery" in prefix and "battery" in suffix
