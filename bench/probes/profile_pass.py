"""Where a forward pass spends its GPU time: torch.profiler kernel totals for one Qwen3-4B-shape
pass of the filter workload (64k packed tokens) and one join pass (anchor store + partner
suffixes), bf16 and fp8; plus causal-attention block sizes for one long (anchor) sequence.

    python -m bench.probes.profile_pass [--dtypes fp8] [--passes-only]
"""

from __future__ import annotations

import json
from collections import defaultdict

import torch

from bench.gpu.common import random_gpu_model
from bench.gpu.quail_runs import ANSWER_IDS
from bench.gpu.workloads import filter_work, join_work
from quail_engine.infer.api import EngineStats
from quail_engine.infer.gpu.runner import GpuRunner
from quail_engine.infer.runner import SeqJob
from quail_kernels.varlen_attention import varlen_attention, varlen_attention_ref
from quail_testing.gpu import bench_ms, setup_logging
from quail_testing.results import Results

GROUPS = [("cudnn_attention", ("cudnn", "sdpa", "fprop", "fmha")),
          ("gemm", ("gemm", "sm90", "cutlass", "xmma", "nvjet", "scaled_mm", "cublas")),
          ("prefix_attention", ("_prefix_attention",)), ("varlen_attention", ("_varlen_attention",)),
          ("silu_mul", ("_silu_mul",)), ("add_rmsnorm", ("_add_rmsnorm",)),
          ("qk_norm_rope", ("_qk_norm_rope",)), ("lse_merge", ("_lse_merge",))]


def _group(name: str) -> str:
    low = name.lower()
    for group, keys in GROUPS:
        if any(k in low for k in keys):
            return group
    return "other"


def _profile(fn) -> dict:
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    totals: dict[str, float] = defaultdict(float)
    for evt in prof.key_averages():
        us = getattr(evt, "device_time_total", None) or getattr(evt, "cuda_time_total", 0)
        if us and evt.key:
            totals[_group(evt.key)] += us / 1000.0
    total = sum(totals.values())
    return {"total_ms": round(total, 2),
            **{k: {"ms": round(v, 2), "share": round(v / total, 3)} for k, v in
               sorted(totals.items(), key=lambda kv: -kv[1])}}


def passes(dtype: str) -> dict:
    config, model = random_gpu_model("qwen3-4b", fp8=dtype == "fp8", kv_fraction=0.3)
    fw = filter_work(200, config.vocab_size)
    runner = GpuRunner(model, EngineStats(), token_budget=65536)
    jobs = lambda: [SeqJob(d, vocab=ANSWER_IDS) for d in fw.docs]  # noqa: E731
    out = {"filter_pass_tokens": sum(len(d) for d in fw.docs),
           "filter": _profile(lambda: runner.run(jobs()))}
    jw = join_work(1, 1100, config.vocab_size)

    def join_once():
        store = SeqJob(jw.anchors[0], read=(), store_kv=True)
        runner.run([store])
        runner.run([SeqJob(p, prefix=store.kv, vocab=ANSWER_IDS) for p in jw.partners])
        store.kv.release()

    out["join_anchor_tokens"] = len(jw.anchors[0])
    out["join_suffix_tokens"] = sum(len(p) for p in jw.partners)
    out["join"] = _profile(join_once)
    return out


def long_causal() -> list[dict]:
    n, hq, hkv, d = 4096, 32, 8, 128
    q = torch.randn(n, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(n, hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    cu = torch.tensor([0, n], dtype=torch.int32, device="cuda")
    flops = 4 * n * (n + 1) / 2 * hq * d
    rows = []
    for blocks in [(64, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3),
                   (64, 128, 4, 3), (128, 32, 4, 4)]:
        ms = bench_ms(lambda b=blocks: varlen_attention(q, k, v, cu, n, d ** -0.5, b))
        rows.append({"blocks": blocks, "ms": round(ms, 3), "tflops": round(flops / ms / 1e9, 1)})
    return rows


def short_causal() -> list[dict]:
    """1,100 join suffixes of 10-20 tokens (their own causal part)."""
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(10, 21, (1100,), generator=g).tolist()
    total, hq, hkv, d = sum(lengths), 32, 8, 128
    q = torch.randn(total, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(total, hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32,
                      device="cuda")
    ref, _ = varlen_attention_ref(q.float(), k.float(), v.float(), cu, 20, d ** -0.5)
    rows = []
    for blocks in [(64, 64, 4, 3), (128, 32, 4, 3), (64, 32, 4, 3), (128, 64, 8, 3),
                   (128, 32, 8, 3), (64, 16, 4, 3)]:
        out, _ = varlen_attention(q, k, v, cu, 20, d ** -0.5, blocks)
        ms = bench_ms(lambda b=blocks: varlen_attention(q, k, v, cu, 20, d ** -0.5, b))
        err = float((out.double() - ref.double()).norm() / ref.double().norm())
        rows.append({"blocks": blocks, "ms": round(ms, 4), "rel_err": err})
    return rows


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="fp8,bf16")
    p.add_argument("--passes-only", action="store_true", help="skip the block-size sweeps")
    args = p.parse_args(argv)
    setup_logging()
    res = Results("profile.json")
    if not args.passes_only:
        res.section("short_causal", short_causal)
        res.section("long_causal", long_causal)
    for dtype in args.dtypes.split(","):
        res.section(f"passes_{dtype}", passes, dtype)
    print(json.dumps(res.data, indent=1, default=str)[-6000:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
