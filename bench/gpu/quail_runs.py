"""The quail engine on the two workloads: GpuRunner over GpuCausalLM, prefixes in the paged
arena, answers read back asynchronously."""

from __future__ import annotations

import time

import torch

from bench.gpu.workloads import FilterWork, JoinWork
from quail_engine.infer.api import EngineStats
from quail_engine.infer.gpu.runner import GpuRunner
from quail_engine.infer.runner import SeqJob

ANSWER_IDS = (9454, 2152)  # two vocabulary rows standing in for "yes" / "no"


def _sync(model) -> None:
    if model.device.type == "cuda":
        torch.cuda.synchronize()


def run_filter(model, work: FilterWork, token_budget: int | None = None) -> dict:
    runner = GpuRunner(model, EngineStats(), token_budget)
    warm = [SeqJob(d, vocab=ANSWER_IDS) for d in work.docs[:256]]
    runner.run(warm)
    jobs = [SeqJob(d, vocab=ANSWER_IDS) for d in work.docs]
    _sync(model)
    gpu0 = runner.stats.gpu_pass_s
    t0 = time.perf_counter()
    runner.run(jobs)
    seconds = time.perf_counter() - t0
    assert all(j.logits is not None and torch.isfinite(j.logits).all() for j in jobs)
    fresh = sum(len(d) for d in work.docs)
    return {"seconds": seconds, "fresh_tokens": fresh, "requested_tokens": fresh,
            "gpu_pass_s": runner.stats.gpu_pass_s - gpu0,
            "token_budget": runner.scheduler.token_budget,
            "passes": runner.stats.forward_passes}


def anchors_per_wave(model, work: JoinWork) -> int:
    longest = max(len(a) for a in work.anchors)
    pages_each = -(-longest // model.arena.page_size)
    return max(1, min(len(work.anchors), model.arena.num_free_pages // pages_each))


def run_join(model, work: JoinWork, token_budget: int | None = None) -> dict:
    runner = GpuRunner(model, EngineStats(), token_budget)
    wave = anchors_per_wave(model, work)
    _join_waves(runner, JoinWork(work.anchors[:1], work.partners), 1)  # warm-up
    runner.stats = EngineStats()
    _sync(model)
    t0 = time.perf_counter()
    answered = _join_waves(runner, work, wave)
    seconds = time.perf_counter() - t0
    fresh = sum(len(a) for a in work.anchors) + len(work.anchors) * sum(len(p) for p in work.partners)
    return {"seconds": seconds, "fresh_tokens": fresh, "answers": answered,
            "gpu_pass_s": runner.stats.gpu_pass_s,
            "anchors_per_wave": wave, "token_budget": runner.scheduler.token_budget,
            "passes": runner.stats.forward_passes}


def _join_waves(runner: GpuRunner, work: JoinWork, wave: int) -> int:
    answered = 0
    for start in range(0, len(work.anchors), wave):
        stores = [SeqJob(a, read=(), store_kv=True) for a in work.anchors[start:start + wave]]
        runner.run(stores)
        pairs = [SeqJob(p, prefix=s.kv, vocab=ANSWER_IDS) for s in stores for p in work.partners]
        runner.run(pairs)
        answered += sum(j.logits is not None for j in pairs)
        for s in stores:
            s.kv.release()
    return answered
