"""A set StopFlag stops a forward pass at the next layer and a call before its next pass
(infer/interrupt.py); cleared, the runner works again."""

from __future__ import annotations

import pytest
import torch

from quail_engine.infer.api import EngineStats
from quail_engine.infer.config import ModelConfig
from quail_engine.infer.interrupt import Interrupted
from quail_engine.infer.models.base import CausalLM
from quail_engine.infer.runner import Runner, SeqJob
from quail_engine.infer.scheduler import Scheduler


def _model() -> CausalLM:
    config = ModelConfig(family="llama", vocab_size=64, hidden_size=32, num_layers=4,
                         num_heads=2, num_kv_heads=1, head_dim=16, intermediate_size=48)
    torch.manual_seed(0)
    model = CausalLM(config)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.02)
    return model.eval()


def test_a_stop_during_a_pass_ends_it_at_the_next_layer_and_resume_restores_the_runner():
    model = _model()
    runner = Runner(model, Scheduler(64, 8), EngineStats())
    ran: list[int] = []
    for i, layer in enumerate(model.model.layers):
        layer.register_forward_hook(lambda *_, i=i: ran.append(i))
    hook = model.model.layers[1].register_forward_hook(lambda *_: runner.stop.set())
    job = SeqJob([1, 2, 3, 4], read=(-1,))
    with pytest.raises(Interrupted):
        runner.run([job])
    assert ran == [0, 1]  # layers 2 and 3 never ran
    hook.remove()
    runner.stop.clear()
    ran.clear()
    runner.run([job])
    assert ran == [0, 1, 2, 3] and job.logits is not None


def test_a_stopped_runner_starts_no_pass():
    runner = Runner(_model(), Scheduler(4, 8), EngineStats())
    runner.stop.set()
    with pytest.raises(Interrupted):
        runner.run([SeqJob([1, 2, 3], read=(-1,))])
    assert runner.stats.forward_passes == 0
