"""Settings every layer shares, resolved in one place: the dialect names, the precision options,
the device ("auto" and the GPU's model name), the cache layout and the compute dtype.

One cache root (`$QUAIL_CACHE_DIR`, else `~/.cache/quail`) with one folder per kind of entry,
whether or not the variable is set:

    <root>/models    converted model weights and tokenizers (one folder per source file)
    <root>/answers   the answer cache (SQLite)
    <root>/tokens    the token store (Arrow files of token ids by content hash)
    <root>/probe     the CPU probe's measured rates
    <root>/locks     one lock file per device, held by the process using it

and the CPU facts that pick the compute dtype (`compute_dtype`), readable without torch.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

log = logging.getLogger(__name__)

# -- names the CLI, the dbt profile and the engine share ---------------------------------------
DIALECTS = ("snowflake", "bigquery", "databricks", "duckdb")
DEFAULT_DIALECT = "duckdb"
# auto: the checkpoint's own (fp8-block for a published FP8 checkpoint on a cuda device, else
# bf16); bf16 everywhere (on a CPU without bf16 dot products: float32); on a cuda device, fp8 /
# fp8-mlp (e4m3 GEMMs on every projection / on the MLP's, per-channel weight and per-token
# activation scales) or fp8-block (every projection, 128 x 128 weight blocks and 1 x 128
# activation groups); on the CPU, fp32 (float32 everywhere: a margin moves by ~2e-5 logits with
# the rows that share its batch, against up to 0.1 in bf16, where near ties flip). P-band: P with
# every yes/no, label and pair decision inside P's measured band asked again in float32
# (infer/reask.py), for a model with a measured band; auto picks one where it can (infer/factory)
Precision = Literal["auto", "bf16", "fp8", "fp8-mlp", "fp8-block", "fp32", "bf16-band",
                    "fp8-band", "fp8-block-band"]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)
DEFAULT_PRECISION: Precision = "auto"


# -- the device -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Device:
    """A device as the engine places work on it: `name` as torch spells it ("cpu", "cuda:0").
    `Device.resolve` turns what a user wrote (auto, cpu, cuda, cuda:N) into one, once per
    session; every later question (is it a GPU, which cost model, which lock) asks this object."""

    name: str

    @classmethod
    def resolve(cls, spec: str | Device) -> Device:
        """`spec` with `auto` resolved (`resolve_device`) and a bare `cuda` as `cuda:0`."""
        if isinstance(spec, Device):
            return spec
        name = resolve_device(str(spec))
        return cls("cuda:0" if name == "cuda" else name)

    @property
    def is_cuda(self) -> bool:
        return self.name == "cuda" or self.name.startswith("cuda:")

    @property
    def kind(self) -> Literal["cuda", "cpu"]:
        """What the cost model and the engine choice tell apart: a CUDA GPU or the CPU."""
        return "cuda" if self.is_cuda else "cpu"

    def __str__(self) -> str:
        return self.name


def resolve_device(device: str) -> str:
    """`auto` as `cuda` when torch sees a GPU, else `cpu`; any other name unchanged."""
    if device != "auto":
        return device
    try:
        import torch  # only to ask for a GPU: every other setting is read without it

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def gpu_name(device: str = "cuda") -> str:
    """The model name of the GPU `device` (cuda or cuda:N) names, as the driver reports it (e.g.
    "NVIDIA H200"); empty when torch sees no GPU. Imports torch and starts CUDA (seconds)."""
    try:
        import torch  # as in resolve_device

        if not torch.cuda.is_available():
            return ""
        return torch.cuda.get_device_name(device if ":" in device else None)
    except (ImportError, RuntimeError, AssertionError, ValueError):
        return ""

CACHE_KINDS = ("models", "answers", "tokens", "probe", "locks", "digests", "kernels")


def prefix_sharing_enabled(env: dict[str, str] | None = None) -> bool:
    """Prefix sharing across rows (infer/prefix_cache.py), on unless `QUAIL_PREFIX_SHARING=0`."""
    value = (os.environ if env is None else env).get("QUAIL_PREFIX_SHARING", "1")
    return value.strip().lower() not in ("0", "false", "off", "no")


def cache_root() -> Path:
    """The cache root: `$QUAIL_CACHE_DIR` when set and non-empty, else `~/.cache/quail`."""
    return Path(os.environ.get("QUAIL_CACHE_DIR") or Path.home() / ".cache" / "quail")


def cache_path(kind: str) -> Path:
    """The folder of one kind of cache entry (not created here)."""
    if kind not in CACHE_KINDS:
        raise ValueError(f"unknown cache kind {kind!r}; expected one of {CACHE_KINDS}")
    return cache_root() / kind


# -- the CPU's compute dtype ---------------------------------------------------------------------
# bf16 is fast on a CPU only with native bf16 dot products (AVX-512 BF16's vdpbf16ps, AMX tiles);
# elsewhere oneDNN converts to float32 and a bf16 GEMM runs ~2-5x slower than a float32 one.
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# ONEDNN_MAX_CPU_ISA (DNNL_MAX_CPU_ISA before oneDNN 2) values that stop below AVX512_CORE_BF16
_ISA_BELOW_BF16 = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE",
                   "AVX512_CORE_VNNI"}


def cpuinfo_fields(cpuinfo: str | None = None) -> dict[str, str]:
    """`key: value` fields of /proc/cpuinfo (the first occurrence of each: the first CPU); empty
    where there is no such file (macOS, Windows)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return {}
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's feature flags (`flags` on x86, `Features` on Arm)."""
    fields = cpuinfo_fields(cpuinfo)
    return frozenset((fields.get("flags") or fields.get("Features") or "").split())


def isa_cap(env: dict[str, str] | None = None) -> str | None:
    """The oneDNN ISA cap the environment sets (upper case), or None."""
    env = os.environ if env is None else env
    value = (env.get("ONEDNN_MAX_CPU_ISA") or env.get("DNNL_MAX_CPU_ISA") or "").strip().upper()
    return value if value not in ("", "ALL", "DEFAULT") else None


def has_native_bf16(flags: frozenset[str] | None = None,
                    env: dict[str, str] | None = None) -> bool:
    """True when the CPU multiplies bf16 natively and no oneDNN ISA cap forbids it."""
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in BF16_FLAGS) and isa_cap(env) not in _ISA_BELOW_BF16


def compute_dtype(device: str = "cpu", flags: frozenset[str] | None = None,
                  env: dict[str, str] | None = None) -> str:
    """The dtype the engine computes in on `device`: "bfloat16" on CUDA and on CPUs with native
    bf16 dot products, "float32" on other CPUs (AVX2 machines: float32 GEMMs ~2-5x faster)."""
    if not str(device).startswith("cpu"):
        return "bfloat16"
    return "bfloat16" if has_native_bf16(flags, env) else "float32"


# -- CPU threads -------------------------------------------------------------------------------
def _cgroup_cpus(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (v2 cpu.max, v1 cfs quota), or None."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def affinity_cpus() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def cpu_threads(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """CPUs this process may use: its affinity mask (taskset, cpusets), capped by a cgroup CPU
    quota (`docker --cpus`), which OpenMP does not see and would oversubscribe."""
    cpus, quota = affinity_cpus(), _cgroup_cpus(cgroup_root)
    return max(1, min(cpus, int(quota))) if quota else cpus
