"""`load_engine(spec, device, precision)`: the engine for a device. On CUDA, the GPU path
(Triton kernels, paged KV arena) for the families it implements; otherwise, or when Triton is
missing, the plain-torch engine on that device.

`precision`: auto (default) gives the float32 reference's decisions wherever a band is measured:
- on a CPU: bf16-band where the CPU multiplies bf16 natively, the model has a measured band and
  the banded run was the faster on the trust bench's prompts, else fp32 (an FP8 checkpoint runs
  dequantized there);
- on a cuda device: the checkpoint's own precision (fp8-block for a published FP8 checkpoint,
  bf16 otherwise), banded (P-band) where the model has a band for it on cuda, else plain (the
  report then says its answers were not checked against float32).
P-band (bf16-band on either device; fp8-band, fp8-block-band on a GPU): precision P with every
yes/no, label and pair decision inside P's measured band asked again in float32 (infer/reask.py:
the plain-torch engine in float32 on the same device, loaded on the first re-ask); refused for a
model without a band. bf16, or, GPU path only: fp8 / fp8-mlp (e4m3 GEMMs with per-channel weight
and per-token activation scales on every layer projection, or on the MLP's alone), fp8-block
(every projection, 128 x 128 weight blocks and 1 x 128 activation groups, the published FP8
checkpoints' scheme): faster, and their close calls may differ from float32's
(bench/results/trust.md). CPU only: fp32 (float32 everywhere: the reference). An fp8 request
that cannot run on the GPU path is an error, never a silent bf16 run; so is fp32 on a cuda
device."""

from __future__ import annotations

import logging
from typing import Any

from quail_engine.errors import ModelError, QuailError
from quail_engine.infer.embedded import source_sha256
from quail_engine.infer.reask import ReaskingEngine, band_for
from quail_engine.settings import Device, Precision, compute_dtype

# The engines (torch; the GPU path also Triton, which a machine may lack) and the checkpoint
# reader (torch) are imported where an engine is made: resolving a precision for a session,
# before any weights load, imports neither.

log = logging.getLogger(__name__)


# GpuEngine.load's kwargs for each precision the GPU path runs
PRECISIONS: dict[Precision, dict[str, Any]] = {
    "bf16": {}, "fp8": {"fp8": True}, "fp8-mlp": {"fp8": True, "fp8_proj": ("gate_up", "down")},
    "fp8-block": {"fp8": True, "fp8_block": True}}
CPU_ONLY: dict[Precision, str] = {"fp32": "float32"}  # precision -> the CPU engine's dtype
BANDED: dict[Precision, Precision] = {"bf16-band": "bf16", "fp8-band": "fp8",
                                      "fp8-block-band": "fp8-block"}  # -> the fast precision
CPU_BAND = "bf16-cpu"  # the band bf16-band reads on a CPU (infer/bands.json)


def band_key(precision: Precision, device: str | Device) -> str:
    """The bands.json key of the fast precision `precision` on `device`."""
    return f"{precision}-{Device.resolve(device).kind}"


def resolve_precision(spec: str, device: str | Device, precision: Precision) -> Precision:
    """`precision` with auto replaced by what it means for `spec` on `device` (above)."""
    known = (*PRECISIONS, *CPU_ONLY, *BANDED)
    if precision != "auto" and precision not in known:
        raise QuailError(f"precision must be one of auto, {', '.join(known)}; got {precision!r}")
    if precision != "auto":
        return precision
    if not Device.resolve(device).is_cuda:
        if compute_dtype("cpu") != "bfloat16":
            return "fp32"  # what this CPU computes bf16 models in anyway
        band = band_for(source_sha256(spec), CPU_BAND)
        return "bf16-band" if band is not None and band.faster_than_reference else "fp32"
    from quail_engine.infer.loader import checkpoint_precision  # torch

    try:
        own = checkpoint_precision(spec)
    except ModelError:  # not a model we can read: the load itself says why
        own = "bf16"
    banded = f"{own}-band"
    if banded in BANDED and band_for(source_sha256(spec), band_key(own, device)) is not None:
        return banded  # type: ignore[return-value]
    return own


def load_engine(spec: str = "default", device: str | Device = "cpu",
                precision: Precision = "auto", *, resolved: Precision | None = None,
                **kwargs: Any):
    """The engine of `spec` on `device` in `precision` (above); `resolved`: what `precision`
    resolves to, when the caller has resolved it already (a session does once, as it opens)."""
    from quail_engine.infer.engine import LocalEngine  # torch
    requested, device = precision, Device.resolve(device)
    precision = resolved or resolve_precision(spec, device, precision)
    on_gpu = device.is_cuda
    if precision in BANDED:
        return _banded(spec, device, BANDED[precision], requested, kwargs)
    if precision in CPU_ONLY:
        if on_gpu:
            raise QuailError(f"precision {precision!r} runs only on the CPU (--device cpu); "
                             f"this run is on {device.name!r}: use bf16 or an fp8 precision")
        return LocalEngine.load(spec, device=device.name, dtype=CPU_ONLY[precision], **kwargs)
    return _plain(spec, device, precision, requested, kwargs)


def _plain(spec: str, device: Device, precision: Precision, requested: Precision,
           kwargs: dict[str, Any]):
    from quail_engine.infer.engine import LocalEngine  # torch

    if precision != "bf16" and not device.is_cuda:
        raise QuailError(f"precision {precision!r} runs only on the GPU path (a cuda device); "
                         f"this run is on {device.name!r}: use bf16 or fp32")
    if not device.is_cuda:  # the CPU's compute dtype: bf16 where it multiplies bf16
        return LocalEngine.load(spec, device=device.name, **kwargs)
    try:
        from quail_engine.infer.gpu.engine import GpuEngine  # Triton, which a machine may lack

        return GpuEngine.load(spec, device=device.name, **PRECISIONS[precision], **kwargs)
    except (ImportError, ValueError) as exc:
        if requested != "auto" and precision != "bf16":
            raise QuailError(f"precision {precision!r} needs the GPU path, which cannot run "
                             f"{spec!r} here: {exc}") from exc
        # ValueError: a family or feature the GPU path does not implement (attention bias,
        # RoPE scaling, families other than llama/qwen2/qwen3/gemma3); ImportError: no Triton
        log.warning("GPU kernels unavailable for %r (%s); running the plain-torch engine on %s",
                    spec, exc, device.name)
        return LocalEngine.load(spec, device=device.name, **kwargs)


def _banded(spec: str, device: Device, fast: Precision, requested: Precision,
            kwargs: dict[str, Any]):
    """`fast`'s answers, the decisions inside its measured band re-asked in float32 by the
    plain-torch engine on the same device, loaded on the first re-ask (infer/reask.py)."""
    from quail_engine.infer.engine import LocalEngine  # torch

    if fast != "bf16" and not device.is_cuda:
        raise QuailError(f"precision '{fast}-band' runs only on a cuda device; use bf16-band "
                         "or fp32 on the CPU")
    if device.is_cuda:
        from quail_engine.infer.gpu.engine import kv_fp8_requested  # Triton, as _plain's

        if kv_fp8_requested():  # the bands were measured over a KV cache in the model dtype
            raise QuailError(f"precision '{fast}-band' re-asks by a band measured with the KV "
                             "cache in bf16, and QUAIL_KV_DTYPE=fp8 has none measured: unset "
                             f"QUAIL_KV_DTYPE, or run '{fast}' (its close calls may differ "
                             "from float32's)")
    band = band_for(source_sha256(spec), band_key(fast, device))
    if band is None:
        raise QuailError(f"precision '{fast}-band' needs a measured band for {spec!r} on "
                         f"{'a GPU' if device.is_cuda else 'the CPU'} and none is committed "
                         "(infer/bands.json; `python -m bench trust --bands` measures one); use "
                         f"{'fp32 (the same answers) or ' if not device.is_cuda else ''}"
                         f"{fast} (its close calls may differ from float32's)")
    engine = _plain(spec, device, fast, requested, kwargs)
    codec = getattr(engine, "codec", None)  # the tokenizer read once, where the engine has one
    if "tokenizer" not in kwargs and codec is not None:
        kwargs = {**kwargs, "tokenizer": codec.tokenizer}
    return ReaskingEngine(engine, lambda: LocalEngine.load(spec, device=device.name,
                                                           dtype="float32", **kwargs), band)
