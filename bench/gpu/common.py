"""Shared helpers of the GPU suites and probes: host-clock timing of long runs and a random-weight
GPU model (kernel timing, ceilings, environment and logging: quail_testing/gpu.py, which the
device checks share)."""

from __future__ import annotations

import time

import torch


def wall(fn, reps: int = 1) -> float:
    """Seconds per call of `fn`, host clock around synchronized calls (for long runs)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps


def random_gpu_model(shape: str = "qwen3-4b", fp8: bool = True, kv_fraction: float = 0.5):
    """-> (config, GpuCausalLM on random bf16 weights of `shape`, seed 0)."""
    from quail_engine.infer.gpu.engine import build_gpu_model
    from quail_testing.random_weights import random_state_dict, shape_config
    config = shape_config(shape)
    sd = random_state_dict(config, seed=0, device="cuda", dtype=torch.bfloat16)
    return config, build_gpu_model(config, sd, fp8=fp8, kv_fraction=kv_fraction)
