"""`load_engine(spec, device)`: the engine for a device. On CUDA, the GPU path (Triton kernels,
paged KV arena) for the families it implements; otherwise, or when Triton is missing, the
plain-torch engine on that device."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def load_engine(spec: str = "default", device: str = "cpu", **kwargs: Any):
    from quail_engine.infer.engine import LocalEngine

    if not str(device).startswith("cuda"):
        return LocalEngine.load(spec, device=device, **kwargs)
    try:
        from quail_engine.infer.gpu.engine import GpuEngine

        return GpuEngine.load(spec, device=device, **kwargs)
    except (ImportError, ValueError) as exc:
        # ValueError: a family or feature the GPU path does not implement (Gemma 3's sliding
        # window, RoPE scaling); ImportError: no Triton
        log.warning("GPU kernels unavailable for %r (%s); running the plain-torch engine on %s",
                    spec, exc, device)
        return LocalEngine.load(spec, device=device, **kwargs)
