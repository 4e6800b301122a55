"""Why a small pass takes 30-90 ms on the GPU: QUAIL-B's passes of under 2,048 tokens (a call's
first rows, a batch's remainder, partners over a cached anchor) read 4 GB of fp8 weights, ~1 ms
at the HBM's bandwidth, yet the reports' pass logs time them at 29-35 ms without a prefix and
60-90 ms over one. This runs such passes through the engine's runner (GpuRunner, the path
`quail query` takes) on a random Qwen3-4B-shape model and splits each into the host's wall time,
the GPU's kernel time, what the host issued (kernel launches, copies, synchronizations, torch
operators by self time) and the Python functions that took the host's time (cProfile).

    python -m bench.probes.small_passes [--reps 10] [--out $OUT/small_passes.json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time
from collections import Counter

import torch

from bench.gpu.common import random_gpu_model
from bench.gpu.quail_runs import ANSWER_IDS
from bench.gpu.workloads import join_work
from quail_engine.infer.api import EngineStats
from quail_engine.infer.gpu.runner import GpuRunner
from quail_engine.infer.runner import SeqJob

# (name, prefix tokens (0: none), rows, tokens per row): shapes from the QUAIL-B pass logs
SHAPES = [("plain_1x65", 0, 1, 65), ("plain_4x220", 0, 4, 220),
          ("prefix_3x64_over_4096", 4096, 3, 64), ("prefix_49x20_over_4096", 4096, 49, 20),
          ("prefix_49x20_over_300", 300, 49, 20)]
RUNTIME = ("cudaLaunchKernel", "cuLaunchKernel", "cudaMemcpy", "Synchronize", "cudaMalloc",
           "cudaFree", "cudaEventRecord", "cudaStreamWait", "cudaHostAlloc", "cudaMemset",
           "cudaGraphLaunch")


def _profile(fn) -> dict:
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=acts) as prof:
        fn()
        torch.cuda.synchronize()
    kernels, kernel_ms, runtime, ops = 0, 0.0, Counter(), Counter()
    for evt in prof.events():
        dev = getattr(evt, "device_type", None)
        if dev is not None and dev == torch.autograd.DeviceType.CUDA:
            kernels += 1
            kernel_ms += evt.time_range.elapsed_us() / 1000.0  # (as profile_query reads it)
            continue
        name = evt.name
        if any(r in name for r in RUNTIME):
            runtime[name] += 1
    for avg in prof.key_averages():
        if getattr(avg, "device_type", None) == torch.autograd.DeviceType.CPU and avg.key.startswith(
                ("aten::", "triton", "cudnn")):
            ops[avg.key] = (avg.count, round(avg.self_cpu_time_total / 1000.0, 3))
    top = sorted(ops.items(), key=lambda kv: -kv[1][1])[:25]
    return {"kernels": kernels, "kernel_ms": round(kernel_ms, 3), "runtime_calls": dict(runtime),
            "torch_ops": sum(c for c, _ in ops.values()),
            "top_ops_self_ms": {k: {"count": c, "self_ms": ms} for k, (c, ms) in top}}


def _cprofile(fn, lines: int = 30) -> str:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    torch.cuda.synchronize()
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(lines)
    return buf.getvalue()


def launch_costs(reps: int = 2000) -> dict:
    """Host microseconds per call, the GPU left to queue (no sync inside the loop): a torch
    operator, and kernel wrappers a layer calls (each a Triton launch plus its own torch
    operators), on small inputs whose kernels take microseconds."""
    from quail_kernels.silu_mul import silu_mul
    from quail_kernels.varlen_attention import causal_amax

    x = torch.randn(64, 2 * 9728, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(64, 8, 128, device="cuda", dtype=torch.bfloat16)
    cu = torch.tensor([0, 64], dtype=torch.int32, device="cuda")
    small = torch.zeros(16, device="cuda")
    calls = {"torch.add": lambda: torch.add(small, 1.0),
             "silu_mul fp8": lambda: silu_mul(x, fp8=True),
             "causal_amax": lambda: causal_amax(v, cu)}
    out = {}
    for name, fn in calls.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        host = (time.perf_counter() - t0) / reps * 1e6
        torch.cuda.synchronize()
        out[name] = round(host, 2)
    return out


def measure(runner: GpuRunner, vocab: int, shape: tuple, reps: int) -> dict:
    name, prefix_len, rows, per_row = shape
    work = join_work(1, rows, vocab, seed=len(name), anchor_len=(prefix_len, prefix_len),
                     partner_len=(per_row, per_row))
    store = None
    if prefix_len:
        store = SeqJob(work.anchors[0], read=(), store_kv=True)
        runner.run([store])
    rows_tokens = work.partners

    def once():
        prefix = store.kv if store is not None else None
        runner.run([SeqJob(t, prefix=prefix, vocab=ANSWER_IDS) for t in rows_tokens])

    for _ in range(3):
        once()
    torch.cuda.synchronize()
    walls = []
    for _ in range(reps):
        t0 = time.perf_counter()
        once()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) * 1000.0)
    out = {"shape": name, "prefix_tokens": prefix_len, "rows": rows, "tokens": rows * per_row,
           "wall_ms": sorted(round(w, 2) for w in walls),
           "wall_ms_median": round(sorted(walls)[len(walls) // 2], 2),
           "profile": _profile(once), "cprofile": _cprofile(once)}
    if store is not None:
        store.kv.release()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--shape", default="qwen3-4b")
    ap.add_argument("--bf16", action="store_true", help="bf16 GEMMs instead of fp8")
    ap.add_argument("--out", default="small_passes.json")
    args = ap.parse_args(argv)
    config, model = random_gpu_model(args.shape, fp8=not args.bf16, kv_fraction=0.3)
    runner = GpuRunner(model, EngineStats(), token_budget=65536)
    result = {"device": torch.cuda.get_device_name(), "shape": args.shape,
              "precision": "bf16" if args.bf16 else "fp8", "layers": config.num_layers,
              "passes": []}
    result["launch_us"] = launch_costs()
    print("host us per call:", result["launch_us"], flush=True)
    for shape in SHAPES:
        row = measure(runner, config.vocab_size, shape, args.reps)
        result["passes"].append(row)
        p = row["profile"]
        print(f"{row['shape']}: wall {row['wall_ms_median']} ms, kernels {p['kernels']} "
              f"({p['kernel_ms']} ms), torch ops {p['torch_ops']}, runtime {p['runtime_calls']}",
              flush=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
