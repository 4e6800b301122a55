"""Device specs for the cost model: GPUs from their (measured where we could) peak rates, the
CPU from a quick probe measured once and cached on disk."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from quail_engine.plan.cost import DeviceSpec

log = logging.getLogger(__name__)

# H100 SXM: datasheet dense bf16 989 TFLOP/s, fp8 1979, HBM3 3.35 TB/s.
H100_SXM = DeviceSpec("h100-sxm", flops=989e12, bandwidth=3.35e12)
H100_SXM_FP8 = DeviceSpec("h100-sxm-fp8", flops=1979e12, bandwidth=3.35e12)
# H200: measured on our machine (bf16 GEMM 805 TFLOP/s, fp8 _scaled_mm 1471, device copy 4.24 TB/s).
H200 = DeviceSpec("h200", flops=805e12, bandwidth=4.24e12)
H200_FP8 = DeviceSpec("h200-fp8", flops=1471e12, bandwidth=4.24e12)

DEVICES = {d.name: d for d in (H100_SXM, H100_SXM_FP8, H200, H200_FP8)}


def cache_dir() -> Path:
    return Path(os.environ.get("QUAIL_CACHE_DIR", Path.home() / ".cache" / "quail"))


PROBE_VERSION = 3
# square and prefill-shaped (tokens x hidden x intermediate) products: CPUs with matrix units
# reach their peak only on the larger ones
PROBE_SHAPES = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 2048, 640))


def _matmul_flops(seconds_budget: float) -> float:
    """Best timed window over PROBE_SHAPES: bf16 through torch when it is installed (the
    engine computes in bf16 on CPU), float32 numpy otherwise."""
    try:
        import torch

        def make(m, k):
            return torch.randn(m, k, dtype=torch.bfloat16)
    except ImportError:
        import numpy as np

        rng = np.random.default_rng(0)

        def make(m, k):
            return rng.standard_normal((m, k), dtype=np.float32)
    best = 0.0
    for m, k, n in PROBE_SHAPES:
        a, b = make(m, k), make(k, n)
        a @ b
        for _ in range(3):
            runs, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds_budget / (3 * len(PROBE_SHAPES)):
                a @ b
                runs += 1
            best = max(best, 2 * m * k * n * runs / (time.perf_counter() - start))
    return best


def probe_cpu(seconds_budget: float = 1.5) -> DeviceSpec:
    """Measure peak matmul FLOP/s and copy bandwidth (a second or two)."""
    import numpy as np

    flops = _matmul_flops(seconds_budget)
    buf = np.ones(64 * 2**20 // 4, dtype=np.float32)
    dst = np.empty_like(buf)
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        np.copyto(dst, buf)
        best = max(best, 2 * buf.nbytes / (time.perf_counter() - start))
    return DeviceSpec("cpu", flops=flops, bandwidth=best)


def cpu_spec(refresh: bool = False) -> DeviceSpec:
    """The CPU's spec, probed once per machine and cached in the quail cache directory."""
    path = cache_dir() / f"cpu_probe_v{PROBE_VERSION}.json"
    if not refresh and path.exists():
        try:
            data = json.loads(path.read_text())
            if data.get("version") == PROBE_VERSION:
                return DeviceSpec("cpu", float(data["flops"]), float(data["bandwidth"]))
        except (ValueError, KeyError, OSError):
            log.warning("ignoring unreadable CPU probe cache %s", path)
    spec = probe_cpu()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"version": PROBE_VERSION, "flops": spec.flops,
                                        "bandwidth": spec.bandwidth}))
    except OSError:
        log.warning("cannot write CPU probe cache %s", path)
    log.info("CPU probe: %.1f GFLOP/s, %.1f GB/s", spec.flops / 1e9, spec.bandwidth / 1e9)
    return spec


def device_spec(name: str) -> DeviceSpec:
    """`cpu`, `cuda` (taken as H200), or a name from DEVICES."""
    if name in ("cpu", "auto"):
        return cpu_spec()
    if name == "cuda":
        return H200
    try:
        return DEVICES[name]
    except KeyError:
        raise ValueError(f"unknown device {name!r}; expected cpu, cuda or one of "
                         f"{sorted(DEVICES)}") from None
