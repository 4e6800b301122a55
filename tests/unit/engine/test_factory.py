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
        raise ValueError("RoPE scaling is not implemented on the GPU path")

    monkeypatch.setattr(gpu.GpuEngine, "load", classmethod(refuse))
    monkeypatch.setattr(LocalEngine, "load", classmethod(
        lambda cls, spec, device, **kw: ("local", spec, device)))
    with caplog.at_level(logging.WARNING):
        assert factory.load_engine("llama-3.1-8b", "cuda:0") == ("local", "llama-3.1-8b", "cuda:0")
    assert "RoPE scaling" in caplog.text


def test_cuda_uses_the_gpu_engine_when_it_loads(monkeypatch):
    gpu = pytest.importorskip("quail_engine.infer.gpu.engine")
    monkeypatch.setattr(gpu.GpuEngine, "load", classmethod(
        lambda cls, spec, device, **kw: ("gpu", spec, device)))
    assert factory.load_engine("some/qwen3", "cuda:0") == ("gpu", "some/qwen3", "cuda:0")


@pytest.mark.parametrize("device", ["cpu", "mps"])
def test_fp8_off_the_gpu_is_refused_not_run_in_bf16(device):
    from quail_engine.errors import QuailError

    with pytest.raises(QuailError, match="'fp8' runs only on the GPU path.*use bf16"):
        factory.load_engine("default", device, precision="fp8")


def test_fp32_runs_the_cpu_engine_in_float32_and_is_refused_on_cuda(monkeypatch):
    from quail_engine.errors import QuailError

    monkeypatch.setattr(LocalEngine, "load", classmethod(
        lambda cls, spec, device, **kw: (spec, device, kw)))
    assert factory.load_engine("default", "cpu", precision="fp32") == (
        "default", "cpu", {"dtype": "float32"})
    assert factory.load_engine("default", "cpu", precision="bf16") == ("default", "cpu", {})
    with pytest.raises(QuailError, match="'fp32' runs only on the CPU.*'cuda:0'"):
        factory.load_engine("default", "cuda:0", precision="fp32")


def test_an_unknown_precision_is_named():
    from quail_engine.errors import QuailError

    with pytest.raises(QuailError, match="auto, bf16, fp8, fp8-mlp, fp8-block, fp32, bf16-band, "
                                         "fp8-band, fp8-block-band; got .int4."):
        factory.load_engine("default", "cpu", precision="int4")


def test_fp8_on_cuda_passes_the_projections_and_never_falls_back(monkeypatch):
    gpu = pytest.importorskip("quail_engine.infer.gpu.engine")
    from quail_engine.errors import QuailError

    seen = []
    monkeypatch.setattr(gpu.GpuEngine, "load", classmethod(
        lambda cls, spec, device, **kw: seen.append(kw) or "gpu"))
    assert factory.load_engine("q", "cuda:0", precision="fp8-mlp") == "gpu"
    assert seen == [{"fp8": True, "fp8_proj": ("gate_up", "down")}]

    def refuse(cls, spec, device, **kw):
        raise ValueError("RoPE scaling is not implemented on the GPU path")

    monkeypatch.setattr(gpu.GpuEngine, "load", classmethod(refuse))
    monkeypatch.setattr(LocalEngine, "load", classmethod(lambda cls, *a, **kw: "local"))
    with pytest.raises(QuailError, match="needs the GPU path.*RoPE scaling"):
        factory.load_engine("llama-3.1-8b", "cuda:0", precision="fp8")
    assert factory.load_engine("llama-3.1-8b", "cuda:0") == "local"  # bf16 still falls back


def test_fp8_engines_are_a_different_model_to_the_answer_cache():
    gpu = pytest.importorskip("quail_engine.infer.gpu.engine")
    assert gpu.precision_model_id("m", False, None) == "m"
    assert gpu.precision_model_id("m", True, None) == "m@fp8"
    assert gpu.precision_model_id("m", True, ("gate_up", "down")) == "m@fp8[gate_up,down]"


def test_a_band_is_refused_over_an_fp8_kv_cache(monkeypatch):
    """The committed bands were measured with the KV cache in bf16: re-asking by them over an
    fp8 arena would keep answers its rounding moved outside the band."""
    gpu = pytest.importorskip("quail_engine.infer.gpu.engine")
    from quail_engine.errors import QuailError

    monkeypatch.setattr(gpu.GpuEngine, "load", classmethod(lambda cls, *a, **kw: "gpu"))
    monkeypatch.setenv("QUAIL_KV_DTYPE", "fp8")
    with pytest.raises(QuailError, match="'fp8-band'.*QUAIL_KV_DTYPE=fp8 has none measured"):
        factory.load_engine("default", "cuda:0", precision="fp8-band")
    assert factory.load_engine("default", "cuda:0", precision="fp8") == "gpu"


@pytest.mark.parametrize("raw,want", [("", 0.4), ("0.65", 0.65), (" 0.3 ", 0.3)])
def test_kv_fraction_defaults_and_is_read_from_the_environment(monkeypatch, raw, want):
    from quail_engine.infer.gpu.engine import kv_fraction_requested

    monkeypatch.setenv("QUAIL_KV_FRACTION", raw)
    assert kv_fraction_requested() == want


@pytest.mark.parametrize("raw", ["0", "0.95", "half", "nan", "-0.4"])
def test_a_kv_fraction_out_of_range_is_named(monkeypatch, raw):
    from quail_engine.errors import QuailError
    from quail_engine.infer.gpu.engine import kv_fraction_requested

    monkeypatch.setenv("QUAIL_KV_FRACTION", raw)
    with pytest.raises(QuailError, match="QUAIL_KV_FRACTION") as err:
        kv_fraction_requested()
    assert repr(raw) in str(err.value)
