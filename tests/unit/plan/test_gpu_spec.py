"""The cost model's GPU spec follows the GPU's model name; an unknown GPU is named as such."""

import logging

import pytest

from quail_engine.plan import device
from quail_engine.plan.device import (
    H100_SXM,
    H100_SXM_FP8,
    H200,
    H200_DATASHEET,
    H200_DATASHEET_FP8,
    H200_FP8,
    device_spec,
    gpu_spec,
)

KNOWN = [
    # (driver's name, precision, datasheet) -> spec
    (("NVIDIA H100 80GB HBM3", "bf16", False), H100_SXM),
    (("NVIDIA H100 80GB HBM3", "fp8-mlp", True), H100_SXM_FP8),
    (("NVIDIA H200", "bf16", False), H200),
    (("NVIDIA H200", "fp8", False), H200_FP8),
    (("NVIDIA H200", "bf16", True), H200_DATASHEET),
    (("NVIDIA H200", "fp8", True), H200_DATASHEET_FP8),
]


@pytest.mark.parametrize("args,expected", KNOWN)
def test_h100_and_h200_keep_their_specs(args, expected):
    assert gpu_spec(*args) == expected


@pytest.mark.parametrize("gpu,precision,expected", [
    ("NVIDIA A100-SXM4-40GB", "bf16", "NVIDIA A100-SXM4-40GB as h200-sustained"),
    ("NVIDIA L4", "fp8", "NVIDIA L4 as h200-sustained-fp8"),
    ("", "bf16", "unknown GPU as h200-sustained"),
])
def test_other_gpu_is_costed_as_h200_under_its_own_name(gpu, precision, expected, caplog):
    with caplog.at_level(logging.WARNING, logger="quail_engine.plan.device"):
        spec = gpu_spec(gpu, precision)
    assert spec.name == expected
    h200 = H200_FP8 if precision == "fp8" else H200
    assert (spec.flops, spec.bandwidth) == (h200.flops, h200.bandwidth)
    assert "no measured spec" in caplog.text


def test_cuda_device_spec_reads_the_gpu_name(monkeypatch):
    asked = []
    monkeypatch.setattr(device, "gpu_name", lambda name: asked.append(name) or "NVIDIA A10G")
    assert device_spec("cuda:1").name == "NVIDIA A10G as h200-sustained"
    assert asked == ["cuda:1"]



CPU = object()


@pytest.mark.parametrize("resolved,expected", [("cuda", H200), ("cpu", CPU)])
def test_auto_is_the_device_the_session_resolves(resolved, expected, monkeypatch):
    # before: `auto` was always costed as the CPU, even on a GPU machine
    monkeypatch.setattr(device, "resolve_device", lambda name: resolved if name == "auto" else name)
    monkeypatch.setattr(device, "gpu_name", lambda name: "NVIDIA H200")
    monkeypatch.setattr(device, "cpu_spec", lambda dtype=None: CPU if dtype is None else dtype)
    assert device_spec("auto") is expected


def test_fp32_on_the_cpu_is_costed_at_its_float32_peak(monkeypatch):
    monkeypatch.setattr(device, "cpu_spec", lambda dtype=None: dtype)
    assert device_spec("cpu", "fp32") == "float32"
    assert device_spec("cpu", "bf16") is None  # the CPU's compute dtype
