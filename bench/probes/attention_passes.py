"""Probe: the attention of real QUAIL-B passes, replayed per variant on the GPU.

Each query runs through the product's session (as in the timed table) until its passes
[first, first + count) have begun; the first layer's `layer_attention` arguments of each of
those passes are kept (q/k/v as the model's views into its QKV buffer, the packed batch with
its plans, the arena), then the query is stopped. Each kept pass is then timed (CUDA events,
median) per variant:

- `own`: each sequence's causal attention (attention.own_attention) with the batch's plan as
  the product builds it (sequences split into Triton launches by length at SHORT_SPLIT) and
  with one launch for all (the plan rebuilt with `split_at=0`); the short launch's tiles
  swept (`--short-blocks`);
- `layer`: the whole layer_attention (own part, prefix part, LSE merge, fp8 quantize), split
  vs one launch;
- `prefix`: the prefix kernel alone per tile shape (`--prefix-blocks`), on passes that have a
  prefix.

    python3 -m bench.probes.attention_passes --ids IMDB-1@2,LEP-2@2,AGENT-1@8 --count 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import torch

from bench.probes.profile_query import stopped_queries
from quail_engine.infer.gpu.attention import SHORT_SPLIT
from quail_testing.gpu import bench_ms, setup_logging
from quail_testing.results import Results

HQ, D, LAYERS = 32, 128, 36
SHORT_BLOCKS = [(64, 32, 4, 3), (64, 16, 4, 3), (64, 64, 4, 3), (128, 64, 8, 3),
                (128, 32, 8, 3), (64, 32, 4, 2), (64, 32, 4, 4), (32, 32, 4, 3)]
PREFIX_BLOCKS = [(64, 64, 4, 3), (64, 32, 4, 3), (128, 64, 8, 3), (64, 64, 4, 4)]


class _Stop(Exception):
    """Raised from the forward hook once the kept passes have begun."""


def capture(suite, case, first: int, count: int) -> list[tuple]:
    """The first layer's layer_attention arguments of passes [first, first + count)."""
    from quail_engine.infer.gpu import model as gpu_model

    forward, attend = gpu_model.GpuCausalLM.forward, gpu_model.layer_attention
    state = {"n": 0, "take": False}
    kept: list[tuple] = []

    def hooked_forward(self, *args, **kwargs):
        n = state["n"]
        state["n"] += 1
        if n >= first + count:
            raise _Stop
        state["take"] = n >= first
        return forward(self, *args, **kwargs)

    def hooked_attend(*args, **kwargs):
        if state["take"]:
            state["take"] = False
            kept.append((args, kwargs))
        return attend(*args, **kwargs)

    gpu_model.GpuCausalLM.forward, gpu_model.layer_attention = hooked_forward, hooked_attend
    try:
        suite.run(case)
    finally:
        gpu_model.GpuCausalLM.forward, gpu_model.layer_attention = forward, attend
    return kept


def _shape(batch) -> dict:
    cu = batch.cu_seqlens.tolist()
    lengths = [b - a for a, b in zip(cu, cu[1:])]
    out = {"tokens": cu[-1], "seqs": len(lengths), "max_len": max(lengths, default=0),
           "own_pairs": sum(n * (n + 1) // 2 for n in lengths),
           "short_seqs": sum(n < SHORT_SPLIT for n in lengths),
           "has_prefix": bool(batch.has_prefix)}
    if batch.has_prefix:
        seg = batch.seg_cu.tolist()
        lens = batch.prefix_plan.lens.tolist()
        out["segments"] = len(lens)
        out["triton_prefix_pairs"] = sum((b - a) * n for a, b, n in zip(seg, seg[1:], lens))
        out["lib_keys"] = sum(batch.prefix_plan.lib_keys.values())
    return out


def _tflops(pairs: int, ms: float) -> float:
    return round(4 * pairs * HQ * D / ms / 1e9, 1)


def _replan(batch, split_at: int, lib):
    from quail_engine.infer.gpu.attention import plan_causal

    cu = batch.cu_seqlens.tolist()
    lengths = [b - a for a, b in zip(cu, cu[1:])]
    return dataclasses.replace(batch, causal_plan=plan_causal(lengths, batch.cu_seqlens.device,
                                                              lib, split_at=split_at))


def time_pass(args: tuple, kwargs: dict, short_blocks, prefix_blocks) -> dict:
    from quail_engine.infer.gpu import attention
    from quail_kernels import prefix_attention as prefix_mod
    from quail_kernels import varlen_attention as varlen_mod

    q, k, v, batch, arena_k, arena_v, scale, fp8, lib = args[:9]
    window = args[9] if len(args) > 9 else kwargs.get("window")
    row = _shape(batch)
    plans = {"split": _replan(batch, attention.SHORT_SPLIT, lib), "one": _replan(batch, 0, lib)}
    ref = attention.own_attention(q, k, v, plans["one"], scale, lib, window)[0].float()
    for name, b in plans.items():
        row[f"own_{name}_ms"] = round(bench_ms(
            lambda b=b: attention.own_attention(q, k, v, b, scale, lib, window)), 3)
        row[f"layer_{name}_ms"] = round(bench_ms(
            lambda b=b: attention.layer_attention(q, k, v, b, arena_k, arena_v, scale, fp8,
                                                  lib, window)), 3)
        got = attention.own_attention(q, k, v, b, scale, lib, window)[0].float()
        row[f"own_{name}_vs_one"] = float((got - ref).norm() / ref.norm().clamp_min(1e-30))
    row["own_one_tflops"] = _tflops(row["own_pairs"], row["own_one_ms"])
    row["own_split_tflops"] = _tflops(row["own_pairs"], row["own_split_ms"])
    default_blocks = varlen_mod.default_blocks
    sweep = {}
    b = plans["split"]
    if b.causal_plan is not None and row["short_seqs"]:
        for blocks in short_blocks:
            def pick(device_type, head_dim, max_seqlen=0, prefix=False, blocks=blocks):
                if max_seqlen < attention.SHORT_SPLIT and not prefix:
                    return blocks
                return default_blocks(device_type, head_dim, max_seqlen, prefix)
            varlen_mod.default_blocks = pick
            try:
                sweep[str(blocks)] = round(bench_ms(
                    lambda: attention.own_attention(q, k, v, b, scale, lib, window)), 3)
            except Exception as exc:  # noqa: BLE001 - a shape that does not compile is a result
                sweep[str(blocks)] = str(exc).splitlines()[0][:120]
            finally:
                varlen_mod.default_blocks = default_blocks
    row["own_split_short_blocks_ms"] = sweep
    if batch.has_prefix and prefix_blocks:
        plan = batch.prefix_plan
        psweep = {}
        for blocks in prefix_blocks:
            try:
                psweep[str(blocks)] = round(bench_ms(lambda blocks=blocks: prefix_mod.prefix_attention(
                    q, arena_k, arena_v, batch.seg_cu, plan.table, plan.lens, batch.max_seg_len,
                    scale, blocks, window=window,
                    positions=batch.positions if window is not None else None)), 3)
            except Exception as exc:  # noqa: BLE001
                psweep[str(blocks)] = str(exc).splitlines()[0][:120]
        row["prefix_blocks_ms"] = psweep
        best = min((ms for ms in psweep.values() if isinstance(ms, float)), default=None)
        if best:
            row["prefix_best_tflops"] = _tflops(row["triton_prefix_pairs"], best)
    return row


def run(args) -> dict:
    out = {}
    for suite, case, first in stopped_queries(args):
        kept = capture(suite, case, first, args.count)
        rows = []
        for a, kw in kept:
            rows.append(time_pass(a, kw, SHORT_BLOCKS if args.sweep else [],
                                  PREFIX_BLOCKS if args.sweep else []))
            print(case.id, json.dumps(rows[-1]), flush=True)
        total = {key: round(sum(r[key] for r in rows), 3) for key in
                 ("own_split_ms", "own_one_ms", "layer_split_ms", "layer_one_ms")}
        total["x36_layers_s_saved"] = round(
            (total["layer_one_ms"] - total["layer_split_ms"]) * LAYERS / 1000, 3)
        out[case.id] = {"passes": rows, "total": total}
        print(case.id, "total", json.dumps(total), flush=True)
        del kept
        torch.cuda.empty_cache()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ids", default="IMDB-1@2,LEP-2@2,AGENT-1@8")
    p.add_argument("--first", type=int, default=2)
    p.add_argument("--count", type=int, default=3)
    p.add_argument("--no-sweep", dest="sweep", action="store_false")
    p.add_argument("--scale", default="0.1")
    p.add_argument("--random-model", default="qwen3-4b")
    p.add_argument("--precision", default="fp8")
    p.add_argument("--workdir", default="/tmp/quail-e2e")
    p.add_argument("--out", default="attention_passes.json", help="file name under $OUT")
    args = p.parse_args(argv)
    setup_logging()
    Results(args.out).section("passes", run, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
