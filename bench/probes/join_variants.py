"""Join on the Qwen3-4B shape, fp8: end-to-end rate for cuDNN key grains (the anchor keys left
to the Triton tail are fewer than one grain) and query windows of several sizes, and how busy the GPU is during the join (kernel time over wall time), to tell host gaps from
kernel time.

    python -m bench.probes.join_variants [--anchors 48]   # writes $OUT/join_variants.json
"""

from __future__ import annotations

import argparse
import time

import torch

from bench.gpu.common import random_gpu_model
from bench.gpu.quail_runs import _join_waves, run_join
from bench.gpu.workloads import JoinWork, join_requested_tokens, join_work
from quail_engine.infer.api import EngineStats
from quail_engine.infer.gpu.attention import LibAttention, cudnn_attend
from quail_engine.infer.gpu.runner import GpuRunner
from quail_testing.gpu import setup_logging
from quail_testing.results import Results


def busy(model, work: JoinWork) -> dict:
    """Kernel time / wall time over `work` (one wave), after a warm-up."""
    runner = GpuRunner(model, EngineStats())
    _join_waves(runner, JoinWork(work.anchors[:1], work.partners), 1)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        _join_waves(runner, work, len(work.anchors))
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    kernel = sum(getattr(e, "device_time_total", 0) or 0 for e in prof.key_averages()) / 1e6
    return {"wall_s": round(wall, 3), "kernel_s": round(kernel, 3),
            "gpu_busy": round(kernel / wall, 3), "anchors": len(work.anchors)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--anchors", type=int, default=48)
    args = p.parse_args(argv)
    setup_logging()
    res = Results("join_variants.json")
    config, model = random_gpu_model("qwen3-4b", fp8=True, kv_fraction=0.5)
    work = join_work(args.anchors, 1100, config.vocab_size)
    res.section("busy_default", busy, model, JoinWork(work.anchors[:8], work.partners))
    for chunk, grain in ((4096, 256), (4096, 64), (4096, 128), (8192, 64)):
        model.lib_attention = LibAttention(cudnn_attend, chunk_rows=chunk, min_rows=chunk * 5 // 8,
                                     key_grain=grain)

        def one():
            run = run_join(model, work)
            run["requested_tokens_per_min"] = round(join_requested_tokens(work) / run["seconds"] * 60)
            return run
        res.section(f"chunk_{chunk}_grain_{grain}", one)
    for key, value in res.data.items():
        if not key.endswith("_seconds"):
            print(key, value)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
