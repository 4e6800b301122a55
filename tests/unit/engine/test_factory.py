"""Which engine a device gets: plain torch on CPU; the GPU path on CUDA, falling back to plain
torch (with a warning) for what the GPU path does not implement."""

import logging

import pytest

from quail_engine.infer import factory
from quail_engine.infer.engine import LocalEngine


def test_cpu_gets_the_plain_torch_engine(monkeypatch):
    seen = {}
    monkeypatch.setattr(LocalEngine, "load", classmethod(
        lambda cls, spec, device, **kw: seen.setdefault("local", (spec, device))))
    assert factory.load_engine("smollm2-135m", "cpu") == ("smollm2-135m", "cpu")


def test_cuda_falls_back_when_the_gpu_path_refuses_the_model(monkeypatch, caplog):
    gpu = pytest.importorskip("quail_engine.infer.gpu.engine")

    def refuse(cls, spec, device, **kw):
        raise ValueError("sliding-window layers are not implemented on the GPU path")

    monkeypatch.setattr(gpu.GpuEngine, "load", classmethod(refuse))
    monkeypatch.setattr(LocalEngine, "load", classmethod(
        lambda cls, spec, device, **kw: ("local", spec, device)))
    with caplog.at_level(logging.WARNING):
        assert factory.load_engine("gemma3-270m", "cuda:0") == ("local", "gemma3-270m", "cuda:0")
    assert "sliding-window" in caplog.text


def test_cuda_uses_the_gpu_engine_when_it_loads(monkeypatch):
    gpu = pytest.importorskip("quail_engine.infer.gpu.engine")
    monkeypatch.setattr(gpu.GpuEngine, "load", classmethod(
        lambda cls, spec, device, **kw: ("gpu", spec, device)))
    assert factory.load_engine("some/qwen3", "cuda:0") == ("gpu", "some/qwen3", "cuda:0")
