"""Device specs for the cost model. GPUs: their (measured where we could) peak rates. The CPU:
a peak from its flags (cores x clock x FLOPs per cycle of its widest vector unit in the compute
dtype), max'd with a short probe (at most ~2 s, once per machine, cached), so a CPU speed of light
is a lower bound on the time of any run, even when the probe ran on a busy machine."""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from quail_engine.plan.cost import DeviceSpec
from quail_engine.settings import (
    affinity_cpus,
    cache_path,
    compute_dtype,
    cpu_flags,
    cpuinfo_fields,
    gpu_name,
    isa_cap,
    resolve_device,
)

log = logging.getLogger(__name__)
stage = logging.getLogger("quail_engine.stage")

# Datasheets (dense): H100 SXM 989 bf16 / 1,979 fp8 TFLOP/s, 3.35 TB/s; H200 the same compute,
# 4.8 TB/s. The benchmark (bench/quailb) normalises its speed of light to these.
H100_SXM = DeviceSpec("h100-sxm", flops=989e12, bandwidth=3.35e12)
H100_SXM_FP8 = DeviceSpec("h100-sxm-fp8", flops=1979e12, bandwidth=3.35e12)
H200_DATASHEET = DeviceSpec("h200", flops=989e12, bandwidth=4.8e12)
H200_DATASHEET_FP8 = DeviceSpec("h200-fp8", flops=1979e12, bandwidth=4.8e12)
# H200 as measured on our machine under minutes-long load (it holds its 700 W cap, SM clock
# ~1.4 GHz): layer GEMMs sustain 670 bf16 / 1,270 fp8 TFLOP/s (bench/probes/sustained.py), device
# copy 4.24 TB/s. The planner costs with these; reports give both.
H200 = DeviceSpec("h200-sustained", flops=670e12, bandwidth=4.24e12)
H200_FP8 = DeviceSpec("h200-sustained-fp8", flops=1270e12, bandwidth=4.24e12)

DEVICES = {d.name: d for d in (H100_SXM, H100_SXM_FP8, H200_DATASHEET, H200_DATASHEET_FP8,
                                 H200, H200_FP8)}


PROBE_VERSION = 4
PROBE_SECONDS = 1.25  # wall budget of the whole probe (matmuls, then copies)
# Prefill-shaped (tokens x hidden x 2*hidden) then square products, smallest first: a slow CPU
# stops after the first; CPUs with matrix units reach their peak only on the larger ones.
PROBE_SHAPES = ((256, 640, 1024), (1024, 1024, 1024), (2048, 2048, 2048))
# /proc/cpuinfo's "cpu MHz" is the current (in a VM: the nominal) clock; when no maximum clock is
# exposed, boost is taken as 1.5x that (the max-boost/base ratio of current server parts).
BOOST_HEADROOM = 1.5
UNKNOWN_CLOCK_HZ = 5e9
CPUFREQ_MAX = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")  # kHz
# one 64-byte cache line per cycle per core: more than any core pulls from memory
BYTES_PER_CYCLE = 64
# the probe's copy: larger than a core's L2, so it reads at least last-level-cache bandwidth
COPY_BYTES = 16 * 2**20


def flops_per_cycle(flags: frozenset[str], dtype: str) -> int:
    """Peak FLOPs per cycle of one core in `dtype`: two vector FMA units of the widest width the
    flags name (no x86 core has more), x2 for bf16 dot products (vdpbf16ps: a pair per fp32
    lane), AMX tiles 1,024 bf16 FLOPs/cycle. bf16 without dot products computes in fp32 lanes."""
    if dtype == "bfloat16" and "amx_bf16" in flags:
        return 1024
    if dtype == "bfloat16" and "avx512_bf16" in flags:
        return 128
    if "avx512f" in flags:
        return 64   # 2 units x 16 fp32 lanes x 2 (multiply + add)
    if "avx2" in flags and "fma" in flags:
        return 32   # 2 x 8 x 2
    if "asimd" in flags:
        return 32   # Arm: 4 x 128-bit FMA pipes x 4 x 2
    if "avx" in flags:
        return 16   # 8 lanes, separate multiply and add ports
    return 8        # SSE2: 4 lanes, multiply and add ports


def cpu_clock_hz(fields: dict[str, str] | None = None) -> float:
    """The highest clock a core may run at: the kernel's cpufreq maximum, else /proc/cpuinfo's
    clock x BOOST_HEADROOM, else UNKNOWN_CLOCK_HZ."""
    try:
        return float(CPUFREQ_MAX.read_text()) * 1e3
    except (OSError, ValueError):
        pass
    fields = cpuinfo_fields() if fields is None else fields
    try:
        return float(fields["cpu MHz"]) * 1e6 * BOOST_HEADROOM
    except (KeyError, ValueError):
        return UNKNOWN_CLOCK_HZ


def cpu_peak(flags: frozenset[str], cores: int, clock_hz: float, dtype: str) -> DeviceSpec:
    """Upper bounds on this CPU's rates: cores x clock x FLOPs (bytes) per cycle."""
    return DeviceSpec(f"cpu-{dtype}", flops=cores * clock_hz * flops_per_cycle(flags, dtype),
                      bandwidth=cores * clock_hz * BYTES_PER_CYCLE)


def best_rate(jobs: list[tuple[float, Callable[[], Callable[[], object]]]], deadline: float,
              clock: Callable[[], float] = time.perf_counter) -> float:
    """Best single-run rate (work per second) over `jobs`, smallest first: (work of one run,
    prepare() -> run). Each job gets an equal share of the time left before `deadline`; a job
    starts only when three runs fit at the best rate so far, a run only when it fits (the first
    job runs at least once), so a slow CPU stops early rather than late."""
    best = 0.0
    for i, (work, prepare) in enumerate(jobs):
        now = clock()
        if best and now + 3 * work / best > deadline:
            break
        slice_end = now + (deadline - now) / (len(jobs) - i)
        run = prepare()
        if best and clock() + work / best > slice_end:
            break
        for count in itertools.count():
            start = clock()
            run()
            now = clock()
            best = max(best, work / max(now - start, 1e-9))
            if now + work / best > (slice_end if count else deadline):
                break
    return best


def _matmul_job(dtype: str, m: int, k: int, n: int) -> Callable[[], Callable[[], object]]:
    """A product of (m, k) by (k, n) in `dtype` through torch (float32 numpy without torch)."""
    def prepare():
        try:
            import torch  # the planner imports no torch; the CPU probe uses it where present

            a, b = (torch.randn(r, c, dtype=getattr(torch, dtype)) for r, c in ((m, k), (k, n)))
        except ImportError:
            rng = np.random.default_rng(0)
            a, b = (rng.standard_normal(shape, dtype=np.float32) for shape in ((m, k), (k, n)))
        return lambda: a @ b
    return prepare


def _copy_job():
    src, dst = (np.ones(COPY_BYTES // 4, dtype=np.float32) for _ in range(2))  # pages touched
    return lambda: np.copyto(dst, src)


def probe_cpu(dtype: str = "float32", seconds_budget: float = PROBE_SECONDS) -> DeviceSpec:
    """Measured matmul FLOP/s in `dtype` and copy bandwidth, within `seconds_budget` of wall
    time (plus at most one small product on a very slow CPU)."""
    start = time.perf_counter()
    flops = best_rate([(2 * m * k * n, _matmul_job(dtype, m, k, n)) for m, k, n in PROBE_SHAPES],
                      start + 0.75 * seconds_budget)
    bandwidth = best_rate([(2 * COPY_BYTES, _copy_job)], start + seconds_budget)
    return DeviceSpec(f"cpu-{dtype}", flops=flops, bandwidth=bandwidth)


def _probe_key(dtype: str) -> dict:
    """What a cached probe must match: a cache folder shared by machines is re-probed."""
    fields = cpuinfo_fields()
    return {"version": PROBE_VERSION, "dtype": dtype, "cores": affinity_cpus(),
            "isa_cap": isa_cap(), "cpu": fields.get("model name") or fields.get("CPU part") or ""}


def measured_cpu(dtype: str, refresh: bool = False) -> DeviceSpec:
    """The probe's rates in `dtype`, measured once per machine and kept under cache/probe."""
    key = _probe_key(dtype)
    path = cache_path("probe") / f"cpu-{dtype}.json"
    if not refresh and path.exists():
        try:
            data = json.loads(path.read_text())
            if data.get("key") == key:
                return DeviceSpec(f"cpu-{dtype}", float(data["flops"]), float(data["bandwidth"]))
        except (ValueError, KeyError, TypeError, OSError):
            log.warning("ignoring unreadable CPU probe cache %s", path)
    stage.info("measuring this CPU once (~2 s)")
    spec = probe_cpu(dtype)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"key": key, "flops": spec.flops, "bandwidth": spec.bandwidth}))
        os.replace(tmp, path)
    except OSError:
        log.warning("cannot write CPU probe cache %s", path)
    log.info("CPU probe (%s): %.1f GFLOP/s, %.1f GB/s", dtype, spec.flops / 1e9,
             spec.bandwidth / 1e9)
    return spec


def cpu_spec(refresh: bool = False, dtype: str | None = None) -> DeviceSpec:
    """The CPU's spec in its compute dtype: per rate, the larger of the flags' peak and the
    probe's measurement, so that speed-of-light times stay lower bounds."""
    dtype = dtype or compute_dtype("cpu")
    peak = cpu_peak(cpu_flags(), affinity_cpus(), cpu_clock_hz(), dtype)
    measured = measured_cpu(dtype, refresh)
    return DeviceSpec(peak.name, flops=max(peak.flops, measured.flops),
                      bandwidth=max(peak.bandwidth, measured.bandwidth))


def device_spec(name: str, precision: str = "bf16", datasheet: bool = False) -> DeviceSpec:
    """`cpu`, `cuda` / `cuda:N` (the GPU torch sees, by its model name: see `gpu_spec`), `auto`
    (settings.resolve_device), or a name from DEVICES. On a GPU, `precision` picks the peak of
    the GEMMs that run (fp8 for fp8 and fp8-mlp), and `datasheet` the vendor's figures instead
    of the sustained ones; on the CPU, fp32 its float32 peak (else its compute dtype's)."""
    name = resolve_device(name)
    if name == "cpu":
        return cpu_spec(dtype="float32" if precision == "fp32" else None)
    if name == "cuda" or name.startswith("cuda:"):
        return gpu_spec(gpu_name(name), precision, datasheet)
    try:
        return DEVICES[name]
    except KeyError:
        raise ValueError(f"unknown device {name!r}; expected cpu, cuda or one of "
                         f"{sorted(DEVICES)}") from None


def gpu_spec(gpu: str, precision: str = "bf16", datasheet: bool = False) -> DeviceSpec:
    """The spec of the GPU the driver calls `gpu` (e.g. "NVIDIA H100 80GB HBM3"): H100 by its
    datasheet, H200 as we measured it (or its datasheet). Any other GPU is costed with the H200's
    figures under a name that says so (`<gpu> as h200-sustained`), and a warning is logged:
    its speed-of-light times are estimates, not bounds."""
    fp8 = precision.startswith("fp8")
    if "H100" in gpu:
        return H100_SXM_FP8 if fp8 else H100_SXM
    if datasheet:
        known = H200_DATASHEET_FP8 if fp8 else H200_DATASHEET
    else:
        known = H200_FP8 if fp8 else H200
    if "H200" in gpu:
        return known
    model = gpu.strip() or "unknown GPU"
    log.warning("no measured spec for %s; the cost model uses the H200's (%s)", model, known.name)
    return replace(known, name=f"{model} as {known.name}")
