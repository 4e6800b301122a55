"""Profile limits around any engine: generated answers are capped at `max_new_tokens`, prompts are
fitted into `max_context`, everything else passes through untouched."""

import pytest

from quail_engine.exec.engine_limits import LimitedEngine
from quail_engine.infer.api import BooleanReadout, GenerateReadout, Request


class _RecordingEngine:
    model_id = "fake"
    max_context = 2048

    def __init__(self):
        self.seen = []

    def run(self, requests):
        self.seen.extend(requests)
        return ["ok"] * len(requests)


_CASES = [
    (GenerateReadout(max_tokens=64), 8, GenerateReadout(max_tokens=8)),
    (GenerateReadout(max_tokens=4, stop=("\n",)), 8, GenerateReadout(max_tokens=4, stop=("\n",))),
    (GenerateReadout(max_tokens=64), None, GenerateReadout(max_tokens=64)),
    (BooleanReadout(), 8, BooleanReadout()),
]


@pytest.mark.parametrize(("readout", "cap", "expected"), _CASES)
def test_generation_is_capped(readout, cap, expected):
    inner = _RecordingEngine()
    engine = LimitedEngine(inner, max_new_tokens=cap)
    assert engine.run([Request(tokens=(1, 2, 3), readout=readout)]) == ["ok"]
    assert inner.seen == [Request(tokens=(1, 2, 3), readout=expected)]


@pytest.mark.parametrize(("limit", "expected"), [(None, 2048), (512, 512), (4096, 2048)])
def test_context_never_exceeds_the_model(limit, expected):
    engine = LimitedEngine(_RecordingEngine(), max_context=limit)
    assert engine.max_context == expected
    assert engine.model_id == "fake"
