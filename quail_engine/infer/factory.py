"""`load_engine(spec, device, precision)`: the engine for a device. On CUDA, the GPU path
(Triton kernels, paged KV arena) for the families it implements; otherwise, or when Triton is
missing, the plain-torch engine on that device.

`precision`: auto (default: on a cuda device the checkpoint's own, fp8-block for a published FP8
checkpoint, bf16 otherwise; on a CPU the answers of float32: bf16-band where the CPU multiplies
bf16 natively and the model has a measured band, else fp32; an FP8 checkpoint runs dequantized
there), bf16-band (CPU only: bf16 with every decision inside bf16's measured band asked again in
float32, infer/reask.py; refused for a model without a band), bf16, or, GPU path
only: fp8 / fp8-mlp (e4m3 GEMMs with per-channel weight and per-token activation scales on every
layer projection, or on the MLP's alone: faster than bf16 by ~1.7x / less, and they cost accuracy
on small models: docs/kernels-notes.md), fp8-block (every projection, 128 x 128 weight blocks and
1 x 128 activation groups, the published FP8 checkpoints' scheme), or, CPU only: fp32 (float32
everywhere, also where the CPU multiplies bf16 natively: a margin moves by ~2e-5 logits with the
rows that share its batch, against up to 0.1 in bf16, at 2.3-3.1x bf16's engine time on a CPU
with bf16 dot products: bench/results/cpu-batch-sensitivity-2026-12-04.md). An fp8 request that
cannot run on the GPU path is an error, never a silent bf16 run; so is fp32 on a cuda device."""

from __future__ import annotations

import logging
from typing import Any

from quail_engine.settings import Precision

log = logging.getLogger(__name__)


# GpuEngine.load's kwargs for each of settings.PRECISIONS but auto and fp32 (the CPU's)
PRECISIONS: dict[Precision, dict[str, Any]] = {
    "bf16": {}, "fp8": {"fp8": True}, "fp8-mlp": {"fp8": True, "fp8_proj": ("gate_up", "down")},
    "fp8-block": {"fp8": True, "fp8_block": True}}
CPU_ONLY: dict[Precision, str] = {"fp32": "float32", "bf16-band": "bfloat16"}  # -> the CPU
#                                                             engine's (first) dtype
CPU_BAND = "bf16-cpu"  # the band bf16-band reads (infer/bands.json)


def resolve_precision(spec: str, device: str, precision: Precision) -> Precision:
    """`precision` with auto replaced by the checkpoint's own on a cuda device (bf16 elsewhere)."""
    from quail_engine.errors import QuailError

    if precision != "auto" and precision not in PRECISIONS and precision not in CPU_ONLY:
        raise QuailError(f"precision must be one of auto, {', '.join([*PRECISIONS, *CPU_ONLY])}; "
                         f"got {precision!r}")
    if precision != "auto":
        return precision
    if not str(device).startswith("cuda"):
        from quail_engine.infer.reask import band_for, source_sha256
        from quail_engine.settings import compute_dtype

        if compute_dtype("cpu") != "bfloat16":
            return "fp32"  # what this CPU computes bf16 models in anyway
        return "bf16-band" if band_for(source_sha256(spec), CPU_BAND) else "fp32"
    from quail_engine.errors import ModelError
    from quail_engine.infer.loader import checkpoint_precision

    try:
        return checkpoint_precision(spec)
    except ModelError:  # not a model we can read: the load itself says why
        return "bf16"


def load_engine(spec: str = "default", device: str = "cpu", precision: Precision = "auto",
                **kwargs: Any):
    from quail_engine.errors import QuailError
    from quail_engine.infer.engine import LocalEngine

    requested = precision
    precision = resolve_precision(spec, device, precision)
    on_gpu = str(device).startswith("cuda")
    if precision in CPU_ONLY:
        if on_gpu:
            raise QuailError(f"precision {precision!r} runs only on the CPU (--device cpu); "
                             f"this run is on {device!r}: use bf16 or an fp8 precision")
        if precision == "bf16-band":
            return _banded(spec, device, kwargs)
        return LocalEngine.load(spec, device=device, dtype=CPU_ONLY[precision], **kwargs)
    if precision != "bf16" and not on_gpu:
        raise QuailError(f"precision {precision!r} runs only on the GPU path (a cuda device); "
                         f"this run is on {device!r}: use bf16 or fp32")
    if not on_gpu:
        return LocalEngine.load(spec, device=device, **kwargs)
    try:
        from quail_engine.infer.gpu.engine import GpuEngine

        return GpuEngine.load(spec, device=device, **PRECISIONS[precision], **kwargs)
    except (ImportError, ValueError) as exc:
        if requested != "auto" and precision != "bf16":
            raise QuailError(f"precision {precision!r} needs the GPU path, which cannot run "
                             f"{spec!r} here: {exc}") from exc
        # ValueError: a family or feature the GPU path does not implement (attention bias,
        # RoPE scaling, families other than llama/qwen2/qwen3/gemma3); ImportError: no Triton
        log.warning("GPU kernels unavailable for %r (%s); running the plain-torch engine on %s",
                    spec, exc, device)
        return LocalEngine.load(spec, device=device, **kwargs)


def _banded(spec: str, device: str, kwargs: dict[str, Any]):
    """bf16 answers, the decisions inside bf16's measured band re-asked in float32 by a second
    engine loaded on the first re-ask (infer/reask.py)."""
    from quail_engine.errors import QuailError
    from quail_engine.infer.engine import LocalEngine
    from quail_engine.infer.reask import ReaskingEngine, band_for, source_sha256

    band = band_for(source_sha256(spec), CPU_BAND)
    if band is None:
        raise QuailError(f"precision 'bf16-band' needs a measured band for {spec!r} and none is "
                         "committed (only the embedded models have one); use fp32 (the same "
                         "answers) or bf16 (faster, close calls may differ)")
    fast = LocalEngine.load(spec, device=device, dtype="bfloat16", **kwargs)
    kwargs = {**kwargs, "tokenizer": fast.codec.tokenizer}  # read once
    return ReaskingEngine(fast, lambda: LocalEngine.load(spec, device=device, dtype="float32",
                                                         **kwargs), band)
