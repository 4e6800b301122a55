"""What `--precision auto` means: the float32 reference's decisions wherever a band is measured
(the banded precision where it was the faster, else float32 itself on a CPU), the checkpoint's
own precision banded on a GPU; a banded precision is refused for a model without a band."""

from __future__ import annotations

import json

import pytest

from quail_engine.errors import QuailError
from quail_engine.infer import embedded, factory, reask
from quail_engine.infer.engine import LocalEngine
from quail_engine.infer.reask import ReaskingEngine


@pytest.fixture
def bands(tmp_path, monkeypatch):
    """Model 'fast' has bands faster than float32, 'slow' one slower, 'none' none."""
    def entry(sha, banded):
        band = {"boolean": 0.2, "label": 0.3, "span": 0.5,
                "seconds": {"reference": 10.0, "banded": banded}}
        return {"gguf_sha256": sha, "bands": {"bf16-cpu": band, "bf16-cuda": band}}

    path = tmp_path / "bands.json"
    path.write_text(json.dumps({"models": {"fast": entry("f", 6.0), "slow": entry("s", 12.0)}}))
    monkeypatch.setattr(reask, "BANDS_FILE", path)
    sha = {"fast": "f", "slow": "s"}.get
    monkeypatch.setattr(embedded, "source_sha256", sha)
    monkeypatch.setattr(factory, "source_sha256", sha)  # (the name factory imported)
    from quail_engine.infer import loader

    monkeypatch.setattr(loader, "checkpoint_precision", lambda spec: "bf16")


@pytest.mark.parametrize("spec, cpu_dtype, expected", [
    ("fast", "bfloat16", "bf16-band"), ("slow", "bfloat16", "fp32"), ("none", "bfloat16", "fp32"),
    ("fast", "float32", "fp32")])
def test_auto_on_a_cpu_gives_float32_decisions(bands, monkeypatch, spec, cpu_dtype, expected):
    monkeypatch.setattr(factory, "compute_dtype", lambda device: cpu_dtype)
    assert factory.resolve_precision(spec, "cpu", "auto") == expected


@pytest.mark.parametrize("spec, expected", [("fast", "bf16-band"), ("slow", "bf16-band"),
                                            ("none", "bf16")])
def test_auto_on_a_gpu_bands_the_checkpoints_own_precision_where_measured(bands, spec, expected):
    assert factory.resolve_precision(spec, "cuda:0", "auto") == expected


def test_a_banded_engine_wraps_bf16_and_loads_float32_on_the_first_close_call(bands, monkeypatch):
    loads = []

    class Loaded:
        codec = type("Codec", (), {"tokenizer": "tok"})()

    def load(cls, spec, device, **kw):
        loads.append(kw.get("dtype"))
        return Loaded()

    monkeypatch.setattr(LocalEngine, "load", classmethod(load))
    engine = factory.load_engine("fast", "cpu", precision="bf16-band")
    assert isinstance(engine, ReaskingEngine) and loads == [None]  # the CPU's bf16
    engine._make_reference()
    assert loads == [None, "float32"]


def test_a_band_is_never_guessed(bands):
    with pytest.raises(QuailError, match="'bf16-band' needs a measured band for 'none'.*fp32"):
        factory.load_engine("none", "cpu", precision="bf16-band")
    with pytest.raises(QuailError, match="'fp8-band' runs only on a cuda device"):
        factory.load_engine("fast", "cpu", precision="fp8-band")
