"""GPU helpers the device checks (tests/device/) and the bench's GPU suites and probes share:
kernel timing through CUDA events, the device's copy and GEMM ceilings, the environment a result
records, and logging to stdout (the device machine's output)."""

from __future__ import annotations

import logging
import sys

import torch


def bench_ms(fn, warmup: int = 25, rep: int = 100) -> float:
    """Median milliseconds of `fn` (CUDA events through triton's do_bench)."""
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def measure_ceilings() -> dict:
    """Device copy GB/s (read + write), bf16 GEMM and fp8 _scaled_mm TFLOP/s at 8192^3."""
    n = 8192
    src = torch.randn(256 * 1024 * 1024, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    copy_ms = bench_ms(lambda: dst.copy_(src))
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    bf16_ms = bench_ms(lambda: a @ b)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    fp8_t_ms = bench_ms(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                                 out_dtype=torch.bfloat16))
    sa, sb = torch.ones(n, 1, device="cuda"), torch.ones(1, n, device="cuda")
    fp8_r_ms = bench_ms(lambda: torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb,
                                                 out_dtype=torch.bfloat16))
    flops = 2 * n ** 3
    return {"copy_GBps": 2 * 4 * 256 * 1024 * 1024 / copy_ms / 1e6,
            "bf16_tflops": flops / bf16_ms / 1e9,
            "fp8_tensorwise_tflops": flops / fp8_t_ms / 1e9,
            "fp8_rowwise_tflops": flops / fp8_r_ms / 1e9}


def env_info() -> dict:
    import triton
    props = torch.cuda.get_device_properties(0)
    return {"torch": torch.__version__, "triton": triton.__version__, "gpu": props.name,
            "sms": props.multi_processor_count, "mem_GiB": round(props.total_memory / 2**30, 1)}


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(name)s %(message)s", datefmt="%H:%M:%S")
