"""Where the filter's end-to-end time goes beyond its kernels (Qwen3-4B shape, fp8): every pass
is bracketed by CUDA events recorded by the host before and after it is queued, so on the GPU's
own clock a pass's span (first event -> last) and the idle time between passes (one pass's last
event -> the next one's first) are measured without a profiler; plus allocator counters
(cudaMalloc/cudaFree calls and retries, which synchronize the device).

    python bench/gpu/filter_steady.py [--docs 20000] [--budgets 65536]   # $OUT/filter_steady.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from bench.gpu.common import Results, setup_logging  # noqa: E402
from bench.gpu.quail_runs import ANSWER_IDS  # noqa: E402
from bench.gpu.workloads import filter_work  # noqa: E402
from quail_engine.infer.api import EngineStats  # noqa: E402
from quail_engine.infer.gpu.engine import build_gpu_model  # noqa: E402
from quail_engine.infer.gpu.random_weights import random_state_dict, shape_config  # noqa: E402
from quail_engine.infer.gpu.runner import GpuRunner  # noqa: E402
from quail_engine.infer.runner import SeqJob  # noqa: E402

ALLOC_KEYS = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")


def steady(model, docs, budget: int | None) -> dict:
    runner = GpuRunner(model, EngineStats(), budget)
    runner.run([SeqJob(d, vocab=ANSWER_IDS) for d in docs[:256]])
    marks: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    inner = runner._run_pass

    def bracketed(jobs, count_as_decode):
        first, last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        first.record()
        out = inner(jobs, count_as_decode)
        last.record()
        marks.append((first, last))
        return out

    runner._run_pass = bracketed
    jobs = [SeqJob(d, vocab=ANSWER_IDS) for d in docs]
    before = torch.cuda.memory_stats()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    runner.run(jobs)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    after = torch.cuda.memory_stats()
    spans = [a.elapsed_time(b) for a, b in marks]
    gaps = [marks[i][1].elapsed_time(marks[i + 1][0]) for i in range(len(marks) - 1)]
    tokens = sum(len(d) for d in docs)
    return {"budget": runner.scheduler.token_budget, "passes": len(marks), "wall_s": round(wall, 3),
            "fresh_tokens_per_s": round(tokens / wall),
            "gpu_pass_ms_sum": round(sum(spans), 1), "gpu_gap_ms_sum": round(sum(gaps), 1),
            "pass_ms_median": round(sorted(spans)[len(spans) // 2], 2),
            "pass_ms_first5": [round(x, 1) for x in spans[:5]],
            "pass_ms_last5": [round(x, 1) for x in spans[-5:]],
            "gap_ms_max": round(max(gaps or [0.0]), 2),
            "alloc": {k: after.get(k, 0) - before.get(k, 0) for k in ALLOC_KEYS}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--budgets", default="65536")
    args = p.parse_args(argv)
    setup_logging()
    res = Results("filter_steady.json")
    config = shape_config("qwen3-4b")
    sd = random_state_dict(config, seed=0, device="cuda", dtype=torch.bfloat16)
    model = build_gpu_model(config, sd, fp8=True, kv_fraction=0.5)
    del sd
    docs = filter_work(args.docs, config.vocab_size).docs
    for budget in args.budgets.split(","):
        print(res.section(f"budget_{budget}", steady, model, docs, int(budget)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
