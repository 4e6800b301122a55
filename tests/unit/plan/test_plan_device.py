"""The CPU as the cost model sees it: the compute dtype from its flags, the peak formula, the
probe (bounded, announced, cached under <cache>/probe), and a speed of light that is a lower
bound on a real run's wall time."""

from __future__ import annotations

import json
import logging

import pytest

from quail_engine import settings
from quail_engine.plan import device
from quail_engine.plan.cost import DeviceSpec

AVX2 = "sse2 avx fma avx2"
ZEN4 = f"{AVX2} avx512f avx512bw avx512_bf16"
SAPPHIRE_RAPIDS = f"{ZEN4} amx_tile amx_bf16 amx_int8"


@pytest.mark.parametrize("flags,env,expected", [
    (AVX2, {}, "float32"),
    (ZEN4, {}, "bfloat16"),
    (SAPPHIRE_RAPIDS, {}, "bfloat16"),
    (ZEN4, {"ONEDNN_MAX_CPU_ISA": "AVX2"}, "float32"),
    (ZEN4, {"ONEDNN_MAX_CPU_ISA": "avx512_core"}, "float32"),
    (SAPPHIRE_RAPIDS, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, "bfloat16"),
    (ZEN4, {"DNNL_MAX_CPU_ISA": "AVX2"}, "float32"),
    (ZEN4, {"ONEDNN_MAX_CPU_ISA": "ALL"}, "bfloat16"),
    ("fp asimd bf16", {}, "float32"),
    ("", {}, "float32"),
])
def test_cpu_compute_dtype_from_flags_and_isa_cap(flags, env, expected):
    assert settings.compute_dtype("cpu", frozenset(flags.split()), env) == expected
    assert settings.compute_dtype("cuda:0", frozenset(flags.split()), env) == "bfloat16"


def test_cpu_flags_read_from_cpuinfo_text():
    text = "processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu avx2 fma\n\nprocessor\t: 1\n"
    assert settings.cpu_flags(text) == {"fpu", "avx2", "fma"}
    assert settings.cpu_flags("Features\t: fp asimd bf16\n") == {"fp", "asimd", "bf16"}


@pytest.mark.parametrize("flags,dtype,per_cycle", [
    (AVX2, "float32", 32),       # 2 FMA units x 8 lanes x 2
    (AVX2, "bfloat16", 32),      # no bf16 dot products: fp32 lanes
    (ZEN4, "float32", 64),       # 2 x 16 x 2
    (ZEN4, "bfloat16", 128),     # vdpbf16ps: a bf16 pair per fp32 lane
    (SAPPHIRE_RAPIDS, "bfloat16", 1024),
    (SAPPHIRE_RAPIDS, "float32", 64),
    ("sse2 avx", "float32", 16),
    ("sse2", "float32", 8),
    ("fp asimd", "float32", 32),
])
def test_peak_is_cores_x_clock_x_flops_per_cycle(flags, dtype, per_cycle):
    spec = device.cpu_peak(frozenset(flags.split()), cores=2, clock_hz=3e9, dtype=dtype)
    assert spec.flops == 2 * 3e9 * per_cycle
    assert spec.bandwidth == 2 * 3e9 * device.BYTES_PER_CYCLE


def test_clock_is_the_maximum_else_the_current_one_with_boost_headroom(tmp_path, monkeypatch):
    monkeypatch.setattr(device, "CPUFREQ_MAX", tmp_path / "missing")
    assert device.cpu_clock_hz({"cpu MHz": "2000.0"}) == 2e9 * device.BOOST_HEADROOM
    assert device.cpu_clock_hz({}) == device.UNKNOWN_CLOCK_HZ
    (tmp_path / "max").write_text("3700000\n")
    monkeypatch.setattr(device, "CPUFREQ_MAX", tmp_path / "max")
    assert device.cpu_clock_hz({"cpu MHz": "2000.0"}) == 3.7e9


class FakeClock:
    """A CPU of `rate` work per second; `prepare` costs `setup` seconds."""

    def __init__(self, rate: float, setup: float = 0.05):
        self.now, self.rate, self.setup = 0.0, rate, setup

    def __call__(self) -> float:
        return self.now

    def job(self, work: float):
        def prepare():
            self.now += self.setup

            def run():
                self.now += work / self.rate
            return run
        return work, prepare


@pytest.mark.parametrize("rate", [5e8, 5.5e9, 1e11, 1e13])
def test_probe_stays_within_its_budget_on_slow_and_fast_cpus(rate):
    """The issue's AVX2 CPU computed bf16 at 5.5 GFLOP/s; the old probe's 2048^3 products took
    it minutes under load. Any rate: within the budget plus one small first product."""
    clock = FakeClock(rate)
    jobs = [clock.job(2 * m * k * n) for m, k, n in device.PROBE_SHAPES]
    best = device.best_rate(jobs, deadline=device.PROBE_SECONDS, clock=clock)
    first = 2 * device.PROBE_SHAPES[0][0] * device.PROBE_SHAPES[0][1] * device.PROBE_SHAPES[0][2]
    assert best == pytest.approx(rate)
    assert clock.now <= max(device.PROBE_SECONDS, clock.setup + first / rate) + 0.1
    assert clock.now <= 2.0 or rate < 1e9


def test_probe_is_announced_cached_under_probe_and_reused(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("QUAIL_CACHE_DIR", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="quail_engine.stage"):
        measured = device.measured_cpu("float32")
    assert "measuring this CPU once (~2 s)" in caplog.messages
    assert measured.flops > 0 and measured.bandwidth > 0
    (cached,) = (tmp_path / "probe").iterdir()
    assert json.loads(cached.read_text())["flops"] == measured.flops
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe"]

    def refuse(*args, **kwargs):
        raise AssertionError("probed again")

    monkeypatch.setattr(device, "probe_cpu", refuse)
    assert device.measured_cpu("float32") == measured


def test_spec_never_below_the_peak_nor_the_measurement(monkeypatch):
    monkeypatch.setattr(device, "measured_cpu",
                        lambda dtype, refresh=False: DeviceSpec("cpu", 1e9, 1e15))
    spec = device.cpu_spec(dtype="float32")
    peak = device.cpu_peak(settings.cpu_flags(), settings.affinity_cpus(), device.cpu_clock_hz(),
                           "float32")
    assert (spec.flops, spec.bandwidth) == (peak.flops, 1e15)


@pytest.mark.model
@pytest.mark.parametrize("probe", ["measured here", "measured on a busy machine"])
def test_speed_of_light_of_a_real_query_is_at_most_its_wall_time(probe, tmp_path, monkeypatch,
                                                                  require_embedded):
    """The issue: a probe taken while other processes held the cores (5 GFLOP/s) made a 202 s
    query report a 630 s speed of light. The flags' peak bounds it from below."""
    from quail_engine.cli import main

    require_embedded("smollm2-135m")
    monkeypatch.setattr(device, "cache_path", lambda kind: tmp_path / kind)
    if probe == "measured on a busy machine":
        monkeypatch.setattr(device, "probe_cpu", lambda dtype: DeviceSpec("cpu", 1e8, 1e8))
    rows = "\n".join(f'{i},"{text}"' for i, text in enumerate(
        ["Great shoes, very comfortable.", "Broke after a day.", "Lovely soft fabric."] * 4))
    (tmp_path / "r.csv").write_text("id,review\n" + rows + "\n")
    rc = main(["query", "-e", "SELECT id FROM r WHERE ai_filter('Is this review positive? ' "
               "|| review)", "--table", f"r={tmp_path / 'r.csv'}", "--model", "smollm2-135m",
               "--device", "cpu", "--no-cache", "--quiet", "--report", str(tmp_path / "rep.json"),
               "--output", str(tmp_path / "out.csv")])
    assert rc == 0
    report = json.loads((tmp_path / "rep.json").read_text())
    assert report["fresh_tokens"] > 0
    assert 0 < report["sol_seconds"] <= report["wall_s"]


@pytest.mark.parametrize("files,expected", [
    ({}, None),
    ({"cpu.max": "max 100000\n"}, None),
    ({"cpu.max": "150000 100000\n"}, 1.5),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2.0),
])
def test_cgroup_quota_caps_the_thread_count(files, expected, tmp_path):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert settings._cgroup_cpus(tmp_path) == expected
    cpus = settings.affinity_cpus()
    assert settings.cpu_threads(tmp_path) == (max(1, min(cpus, int(expected))) if expected
                                              else cpus)
