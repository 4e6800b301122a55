"""settings.Device: what a user writes for a device, resolved once, and the questions every layer
asks of it (a GPU or not, which cost model) answered from the one object."""

import pytest

from quail_engine import settings
from quail_engine.settings import Device


@pytest.mark.parametrize("spec,name,is_cuda,kind", [
    ("cpu", "cpu", False, "cpu"),
    ("cuda", "cuda:0", True, "cuda"),
    ("cuda:0", "cuda:0", True, "cuda"),
    ("cuda:3", "cuda:3", True, "cuda"),
    ("mps", "mps", False, "cpu"),
    ("cudaish", "cudaish", False, "cpu"),
])
def test_device_resolves_a_written_device(spec, name, is_cuda, kind):
    device = Device.resolve(spec)
    assert (device.name, device.is_cuda, device.kind, str(device)) == (name, is_cuda, kind, name)
    assert Device.resolve(device) is device


@pytest.mark.parametrize("seen,expected", [("cuda", "cuda:0"), ("cpu", "cpu")])
def test_auto_is_resolved_from_what_torch_sees(monkeypatch, seen, expected):
    monkeypatch.setattr(settings, "resolve_device", lambda spec: seen if spec == "auto" else spec)
    assert Device.resolve("auto").name == expected
