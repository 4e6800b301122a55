"""Where the filter's and the join's end-to-end time goes beyond their kernels (Qwen3-4B shape,
fp8): every pass is bracketed by CUDA events recorded by the host before and after it is queued, so on the GPU's
own clock a pass's span (first event -> last) and the idle time between passes (one pass's last
event -> the next one's first) are measured without a profiler; plus allocator counters
(cudaMalloc/cudaFree calls and retries, which synchronize the device).

    python -m bench.probes.steady [--docs 20000] [--budgets 65536] [--anchors 48]  # $OUT/steady.json
"""

from __future__ import annotations

import argparse
import time

import torch

from bench.gpu.common import random_gpu_model
from bench.gpu.quail_runs import ANSWER_IDS, _join_waves, anchors_per_wave
from bench.gpu.workloads import JoinWork, filter_work, join_requested_tokens, join_work
from quail_engine.infer.api import EngineStats
from quail_engine.infer.gpu.runner import GpuRunner
from quail_engine.infer.runner import SeqJob
from quail_testing.gpu import setup_logging
from quail_testing.results import Results

ALLOC_KEYS = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")


def _bracket(runner: GpuRunner) -> list:
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
    return marks


def _timed(marks: list, fn, tokens: int) -> dict:
    before = torch.cuda.memory_stats()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    after = torch.cuda.memory_stats()
    spans = [a.elapsed_time(b) for a, b in marks]
    gaps = [marks[i][1].elapsed_time(marks[i + 1][0]) for i in range(len(marks) - 1)]
    return {"passes": len(marks), "wall_s": round(wall, 3),
            "fresh_tokens_per_s": round(tokens / wall),
            "gpu_pass_ms_sum": round(sum(spans), 1), "gpu_gap_ms_sum": round(sum(gaps), 1),
            "pass_ms_median": round(sorted(spans)[len(spans) // 2], 2),
            "pass_ms_first5": [round(x, 1) for x in spans[:5]],
            "pass_ms_last5": [round(x, 1) for x in spans[-5:]],
            "gap_ms_max": round(max(gaps or [0.0]), 2),
            "alloc": {k: after.get(k, 0) - before.get(k, 0) for k in ALLOC_KEYS}}


def steady(model, docs, budget: int | None) -> dict:
    runner = GpuRunner(model, EngineStats(), budget)
    runner.run([SeqJob(d, vocab=ANSWER_IDS) for d in docs[:256]])
    marks = _bracket(runner)
    jobs = [SeqJob(d, vocab=ANSWER_IDS) for d in docs]
    out = _timed(marks, lambda: runner.run(jobs), sum(len(d) for d in docs))
    out["host_syncs_one_pass"] = _syncs(lambda: runner.run(jobs[:200]))
    return {"budget": runner.scheduler.token_budget, **out}


def steady_join(model, work) -> dict:
    """The bench's join (anchor stores, then every partner over each anchor, in waves);
    fresh_tokens_per_s counts anchors and suffixes."""
    runner = GpuRunner(model, EngineStats())
    _join_waves(runner, JoinWork(work.anchors[:1], work.partners), 1)
    marks = _bracket(runner)
    fresh = sum(len(a) for a in work.anchors) + len(work.anchors) * sum(
        len(p) for p in work.partners)
    out = _timed(marks, lambda: _join_waves(runner, work, anchors_per_wave(model, work)), fresh)
    out["requested_tokens_per_min"] = round(join_requested_tokens(work) / out["wall_s"] * 60)
    out["host_syncs_one_anchor"] = _syncs(lambda: _join_waves(
        runner, JoinWork(work.anchors[:1], work.partners), 1))
    return out


def _syncs(fn) -> list[str]:
    """Where `fn` makes the host wait for the device (torch's sync debug mode warnings)."""
    import warnings
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    seen: dict[str, int] = {}
    for w in caught:
        key = f"{w.filename}:{w.lineno} {str(w.message)[:80]}"
        seen[key] = seen.get(key, 0) + 1
    return [f"{n}x {k}" for k, n in sorted(seen.items(), key=lambda kv: -kv[1])[:12]]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--budgets", default="65536")
    p.add_argument("--anchors", type=int, default=0, help="also the join, this many anchors")
    args = p.parse_args(argv)
    setup_logging()
    res = Results("steady.json")
    config, model = random_gpu_model("qwen3-4b", fp8=True, kv_fraction=0.5)
    docs = filter_work(args.docs, config.vocab_size).docs
    for budget in filter(None, args.budgets.split(",")):
        print(res.section(f"budget_{budget}", steady, model, docs, int(budget)))
    if args.anchors:
        work = join_work(args.anchors, 1100, config.vocab_size)
        print(res.section("join", steady_join, model, work))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
