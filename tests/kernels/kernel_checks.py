"""Comparison helpers for kernel-vs-reference tests."""

import torch


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def fp32_tol() -> float:
    """Tolerance for float32 kernels against their float32 torch reference: exact fp32 under the
    interpreter; on a GPU, Triton's tl.dot on float32 inputs runs in TF32 (10-bit mantissa), seen
    at 6e-4 to 2.7e-3 relative error on the H200 (2026-11-29)."""
    return 1e-4 if interpreted() or not torch.cuda.is_available() else 5e-3


def dequant(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale.float()


def poisoned_like(t: torch.Tensor) -> torch.Tensor:
    return torch.full_like(t, float("nan"))


def check_fp8(out, scale, ref, ref_scale, tol=2e-2):
    """fp8 output vs reference: the per-row scales always; the values only off the interpreter,
    whose float->fp8 cast is wrong (seen: -127.57 cast to -64 under triton 3.9)."""
    assert out.dtype == torch.float8_e4m3fn
    assert torch.allclose(scale, ref_scale, rtol=1e-4)
    if not interpreted():
        assert rel_err(dequant(out, scale), dequant(ref, ref_scale)) < tol


def interpreted() -> bool:
    import os
    return os.environ.get("TRITON_INTERPRET") == "1"
