"""Where a QUAIL-B query's GPU passes spend their time, kernel group by kernel group.

The query runs through the product's session as the timed table runs it (bench/quailb/gpu_table:
random-weight model, the override, the generated corpus); torch.profiler records forward passes
[first, first + count) of GpuCausalLM, then the query is stopped. Per query: the profiled
passes' shapes (tokens, sequences, prefix tokens, attention pairs) and wall, each kernel
group's milliseconds (profile_pass.GROUPS) and the top kernels by name.

`--routes`: the attention routes at the long-document shapes the profile points to (one
sequence of n queries over a P-key prefix; one long causal sequence), our Triton kernels
against cuDNN's fused attention, TFLOP/s of the useful work.

    python -m bench.probes.profile_query --ids BIO-2,AGENT-1,BIO-4@24 --first 8 --count 6 \
        --random-model qwen3-4b --workdir /tmp/quail-e2e          # writes $OUT/profile_query.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

from bench.probes.profile_pass import _group
from quail_testing.gpu import bench_ms, setup_logging
from quail_testing.results import Results


class _StopQuery(Exception):
    """Raised from the forward hook once the profiled passes ran."""


def _shape(input_ids, cu_seqlens, prefixes) -> dict:
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    pre = [p.num_tokens if p is not None else 0 for p in prefixes]
    pairs = sum(n * (n + 1) // 2 + n * p for n, p in zip(lens, pre))
    return {"tokens": int(input_ids.numel()), "seqs": len(lens), "prefix_tokens": sum(pre),
            "max_len": max(lens or [0]), "attention_pairs": pairs}


MARK = "spin_kernel"  # torch.cuda._sleep's kernel: launched as each profiled pass begins


def _passes_between_marks(prof) -> list[list]:
    """The CUDA kernel events of each profiled pass: those between consecutive marker kernels
    (a marker is launched as a pass enters forward, so it runs once the GPU is done with what
    was queued before)."""
    cuda = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    marks = sorted(e.time_range.start for e in cuda if MARK in e.name)
    kernels = sorted((e for e in cuda if MARK not in e.name), key=lambda e: e.time_range.start)
    return [[e for e in kernels if a < e.time_range.start < b]
            for a, b in zip(marks, marks[1:])]


def _pass_times(passes: list[list]) -> dict:
    """Per profiled pass: its span on the GPU (first kernel start to last kernel end), the
    idle time inside it (the GPU waiting on the host's launches) and the gap before the next
    pass's first kernel (the host between passes)."""
    rows = []
    for i, evts in enumerate(passes):
        if not evts:
            continue
        first = min(e.time_range.start for e in evts)
        last = max(e.time_range.end for e in evts)
        nxt = passes[i + 1] if i + 1 < len(passes) else []
        gap = (min(e.time_range.start for e in nxt) - last) if nxt else None
        rows.append({"span_ms": round((last - first) / 1000.0, 2),
                     "idle_ms": _idle(evts)["idle_ms"],
                     "gap_after_ms": round(gap / 1000.0, 2) if gap is not None else None})
    return {"span_ms": round(sum(r["span_ms"] for r in rows), 1),
            "idle_in_passes_ms": round(sum(r["idle_ms"] for r in rows), 1),
            "gaps_between_ms": round(sum(r["gap_after_ms"] or 0 for r in rows), 1),
            "per_pass": rows}


def _idle(events) -> dict:
    """The GPU's idle time between the profiled kernels: in all, and summed by the pair of
    kernel groups around each gap of more than 5 us (which launch the device waited for)."""
    spans = sorted((e.time_range.start, e.time_range.end, _group(e.name), e.name[:60])
                   for e in events)
    by_pair: dict[str, list] = defaultdict(lambda: [0.0, 0])
    by_kernels: dict[str, list] = defaultdict(lambda: [0.0, 0])
    idle = 0.0
    end, last, last_name = spans[0][1], spans[0][2], spans[0][3]
    for s, e, g, name in spans[1:]:
        gap = s - end
        if gap > 5:
            idle += gap
            for table, key in ((by_pair, f"{last} -> {g}"), (by_kernels, f"{last_name} -> {name}")):
                table[key][0] += gap / 1000.0
                table[key][1] += 1
        if e > end:
            end, last, last_name = e, g, name
    busy = (end - spans[0][0]) - idle
    return {"span_ms": round((end - spans[0][0]) / 1000.0, 1), "busy_ms": round(busy / 1000, 1),
            "idle_ms": round(idle / 1000.0, 1),
            **{name: {k: {"ms": round(v[0], 1), "gaps": v[1]} for k, v in
                      sorted(table.items(), key=lambda kv: -kv[1][0])[:12]}
               for name, table in (("idle_by_pair", by_pair), ("idle_by_kernels", by_kernels))}}


ALLOC_KEYS = ("num_alloc_retries", "num_device_alloc", "num_device_free", "num_sync_all_streams",
              "num_ooms")


def _allocator_delta(before: dict, after: dict) -> dict:
    """What the caching allocator did over the profiled passes: cudaMalloc/cudaFree calls and
    retries (a retry frees every cached block, waiting on the device), and its peak."""
    out = {k: after.get(k, 0) - before.get(k, 0) for k in ALLOC_KEYS}
    out["reserved_gib"] = round(after.get("reserved_bytes.all.current", 0) / 2**30, 2)
    out["peak_allocated_gib"] = round(after.get("allocated_bytes.all.peak", 0) / 2**30, 2)
    return out


def profile_query(suite, case, first: int, count: int) -> dict:
    """Runs `case` until pass first + count, profiling passes [first, first + count). The
    engine runs passes on its own thread (op_runner's pool, one per operator), so the profiler
    runs on this one over the whole query, CUDA activity only, and a marker kernel bounds the
    profiled passes."""
    from quail_engine.infer.gpu.model import GpuCausalLM

    forward = GpuCausalLM.forward
    state = {"n": 0, "shapes": [], "t0": 0.0, "wall": 0.0}

    def hooked(self, input_ids, positions, cu_seqlens, prefixes, read_index, store_kv=None):
        n = state["n"]
        state["n"] += 1
        if n == first:
            torch.cuda.synchronize()
            state["t0"] = time.perf_counter()
            state["mem0"] = torch.cuda.memory_stats()
        if first <= n <= first + count:
            torch.cuda._sleep(100)
        if n >= first + count:  # every later pass too (the operator's pool may already hold one)
            if n == first + count:
                torch.cuda.synchronize()
                state["wall"] = time.perf_counter() - state["t0"]
                state["mem"] = _allocator_delta(state["mem0"], torch.cuda.memory_stats())
            raise _StopQuery
        if n >= first:
            state["shapes"].append(_shape(input_ids, cu_seqlens, prefixes))
        return forward(self, input_ids, positions, cu_seqlens, prefixes, read_index, store_kv)

    GpuCausalLM.forward = hooked
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            row = suite.run(case)
    finally:
        GpuCausalLM.forward = forward
    passes = _passes_between_marks(prof)
    events = [e for p in passes for e in p]
    if not state["wall"] or not events:
        return {"error": row.get("error") or f"the query ran {state['n']} passes, fewer than "
                f"{first + count + 1}", "passes_seen": state["n"], "kernel_events": len(events)}
    groups: dict[str, float] = defaultdict(float)
    kernels: dict[str, float] = defaultdict(float)
    idle = _idle(events)
    for evt in events:
        ms = evt.time_range.elapsed_us() / 1000.0
        groups[_group(evt.name)] += ms
        kernels[evt.name[:120]] += ms
    total = sum(groups.values())
    shapes = state["shapes"]
    return {"passes": len(shapes), "wall_ms": round(state["wall"] * 1000, 1),
            "kernel_ms": round(total, 1), "kernels": len(events), **idle,
            "by_pass": _pass_times(passes), "allocator": state.get("mem"),
            "tokens": sum(s["tokens"] for s in shapes),
            "seqs": sum(s["seqs"] for s in shapes),
            "prefix_tokens": sum(s["prefix_tokens"] for s in shapes),
            "attention_pairs": sum(s["attention_pairs"] for s in shapes),
            "groups": {k: {"ms": round(v, 1), "share": round(v / total, 3)}
                       for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
            "top_kernels": {k: round(v, 1) for k, v in
                            sorted(kernels.items(), key=lambda kv: -kv[1])[:15]},
            "shapes": shapes}


def device_suite(args):
    """The timed table's suite on the GPU (random-weight model written under `--workdir`,
    the override, no ledger), its engine loaded."""
    from bench.quailb.run import ROOT
    from quail_testing.model_dir import write_model_dir
    from quail_testing.quailb.suite import open_suite

    work = Path(args.workdir)
    model_dir = work / f"model-{args.random_model}"
    write_model_dir(model_dir, ROOT / ".carry" / "e2e" / "tok", False, "cuda")
    suite = open_suite(work, args.scale, model=str(model_dir), device="cuda", override=True,
                       precision=args.precision, ledger=False)
    suite.load()
    return suite


def stopped_queries(args):
    """(suite, case, first pass) for each of `--ids` (ID or ID@FIRST) on the device suite; the
    probes stop each query early, so their answers are removed at the end (they must not reach
    the timed table's runs)."""
    from bench.quailb.run import _cases

    suite = device_suite(args)
    try:
        for spec in args.ids.split(","):
            qid, _, first = spec.partition("@")
            yield suite, _cases([qid], False)[0], int(first or args.first)
    finally:
        shutil.rmtree(Path(args.workdir) / "answers", ignore_errors=True)


def run_queries(args) -> dict:
    out = {}
    for suite, case, first in stopped_queries(args):
        out[case.id] = profile_query(suite, case, first, args.count)
        print(case.id, json.dumps({k: v for k, v in out[case.id].items() if k != "shapes"}))
    return out


# --- attention routes ------------------------------------------------------------------------

HQ, HKV, D = 32, 8, 128


def _tflops(pairs: float, ms: float) -> float:
    return round(4 * pairs * HQ * D / ms / 1e9, 1)


def _prefix_route(n: int, p: int) -> dict:
    """One sequence of n queries over a p-key prefix in arena pages: Triton over the pages vs
    cuDNN over the prefix's whole 256-key grains (contiguous)."""
    from quail_engine.infer.gpu.attention import cudnn_attend
    from quail_kernels.prefix_attention import prefix_attention

    scale, page = D ** -0.5, 64  # the GPU engine's arena pages
    q = torch.randn(n, HQ, D, device="cuda", dtype=torch.bfloat16)
    pages = -(-p // page)
    kc = torch.randn(pages, page, HKV, D, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    cu = torch.tensor([0, n], dtype=torch.int32, device="cuda")
    table = torch.arange(pages, dtype=torch.int32, device="cuda")[None]
    lens = torch.tensor([p], dtype=torch.int32, device="cuda")
    tri = bench_ms(lambda: prefix_attention(q, kc, vc, cu, table, lens, n, scale))
    grain = p // 256 * 256
    kk, vv = kc.flatten(0, 1)[:grain], vc.flatten(0, 1)[:grain]
    lib = bench_ms(lambda: cudnn_attend(q, kk, vv, scale))
    return {"route": "prefix", "queries": n, "keys": p, "triton_ms": round(tri, 3),
            "triton_tflops": _tflops(n * p, tri), "cudnn_keys": grain,
            "cudnn_ms": round(lib, 3), "cudnn_tflops": _tflops(n * grain, lib)}


def _causal_route(n: int) -> dict:
    """One causal sequence of n tokens: our varlen kernel vs cuDNN's causal attention."""
    from quail_kernels.varlen_attention import varlen_attention

    scale = D ** -0.5
    q = torch.randn(n, HQ, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(n, HKV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    cu = torch.tensor([0, n], dtype=torch.int32, device="cuda")
    tri = bench_ms(lambda: varlen_attention(q, k, v, cu, n, scale))
    launch_order = bench_ms(lambda: varlen_attention(q, k, v, cu, n, scale, last_first=False))

    def causal():
        return torch.ops.aten._scaled_dot_product_cudnn_attention(
            q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], None,
            True, 0.0, True, False, scale=scale)
    try:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        causal()  # a new shape: cuDNN builds its graph (cached per thread)
        torch.cuda.synchronize()
        first_ms = (time.perf_counter() - t0) * 1000
        lib = bench_ms(causal)
        o_lib = causal()[0][0].transpose(0, 1).float()
        o_tri = varlen_attention(q, k, v, cu, n, scale)[0].float()
        err = float((o_lib - o_tri).norm() / o_tri.norm())
    except RuntimeError as exc:
        lib, err, first_ms = None, str(exc).splitlines()[0][:200], None
    pairs = n * (n + 1) / 2
    return {"route": "causal", "len": n, "triton_ms": round(tri, 3),
            "triton_tflops": _tflops(pairs, tri),
            "triton_launch_order_tflops": _tflops(pairs, launch_order),
            "cudnn_ms": round(lib, 3) if lib else None,
            "cudnn_first_call_ms": round(first_ms, 1) if first_ms else None,
            "cudnn_tflops": _tflops(pairs, lib) if lib else None, "cudnn_vs_triton": err}


def _own_route(lengths: list[int]) -> dict:
    """The product's own attention (attention.own_attention) over one packed pass of these
    sequences: the library's causal calls for the long ones vs all on Triton."""
    from types import SimpleNamespace

    from quail_engine.infer.gpu.attention import own_attention, plan_causal, probe_cudnn
    from quail_kernels.varlen_attention import varlen_attention

    lib = probe_cudnn(torch.device("cuda"), HQ, HKV, D)
    scale, total = D ** -0.5, sum(lengths)
    qkv = torch.randn(total, HQ + 2 * HKV, D, device="cuda", dtype=torch.bfloat16)
    q, k, v = qkv[:, :HQ], qkv[:, HQ:HQ + HKV], qkv[:, HQ + HKV:]  # strided, as in the model
    cu = torch.tensor([0] + [sum(lengths[:i + 1]) for i in range(len(lengths))],
                      dtype=torch.int32, device="cuda")
    batch = SimpleNamespace(cu_seqlens=cu, max_seqlen=max(lengths),
                            causal_plan=plan_causal(lengths, torch.device("cuda"), lib))
    o_tri, l_tri = varlen_attention(q, k, v, cu, max(lengths), scale)
    o_lib, l_lib = own_attention(q, k, v, batch, scale, lib)
    tri = bench_ms(lambda: varlen_attention(q, k, v, cu, max(lengths), scale))
    ours = bench_ms(lambda: own_attention(q, k, v, batch, scale, lib))
    pairs = sum(n * (n + 1) / 2 for n in lengths)
    return {"route": "own", "lengths": lengths,
            "library_seqs": len(batch.causal_plan.lib) if batch.causal_plan else 0,
            "triton_ms": round(tri, 3), "triton_tflops": _tflops(pairs, tri),
            "routed_ms": round(ours, 3), "routed_tflops": _tflops(pairs, ours),
            "o_rel_err": float((o_lib.float() - o_tri.float()).norm() / o_tri.float().norm()),
            "lse_max_abs_diff": float((l_lib - l_tri).abs().max())}


def _prefix_blocks(n: int, p: int) -> list[dict]:
    """Our prefix kernel's launch shapes at one long segment (n queries over p keys)."""
    from quail_kernels.prefix_attention import prefix_attention

    scale, page = D ** -0.5, 64
    q = torch.randn(n, HQ, D, device="cuda", dtype=torch.bfloat16)
    pages = -(-p // page)
    kc = torch.randn(pages, page, HKV, D, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    cu = torch.tensor([0, n], dtype=torch.int32, device="cuda")
    table = torch.arange(pages, dtype=torch.int32, device="cuda")[None]
    lens = torch.tensor([p], dtype=torch.int32, device="cuda")
    ref = prefix_attention(q, kc, vc, cu, table, lens, n, scale)[0].float()
    rows = []
    for blocks in [(64, 64, 4, 3), (128, 64, 8, 3), (128, 64, 4, 3), (128, 64, 8, 4),
                   (64, 64, 4, 4), (128, 32, 4, 3)]:
        try:
            ms = bench_ms(lambda b=blocks: prefix_attention(q, kc, vc, cu, table, lens, n,
                                                            scale, b))
            out = prefix_attention(q, kc, vc, cu, table, lens, n, scale, blocks)[0].float()
            rows.append({"queries": n, "keys": p, "blocks": blocks, "ms": round(ms, 3),
                         "tflops": _tflops(n * p, ms),
                         "vs_default": float((out - ref).norm() / ref.norm())})
        except Exception as exc:  # noqa: BLE001 - a shape that does not compile is a result too
            rows.append({"queries": n, "keys": p, "blocks": blocks, "error": str(exc)[:200]})
        print(rows[-1])
    return rows


def routes() -> list[dict]:
    rows = []
    for n, p in [(1370, 9000), (640, 9000), (4104, 3840)]:
        rows += _prefix_blocks(n, p)
    for n, p in [(640, 9000), (1370, 9000), (2560, 9000), (640, 20000), (1370, 20000),
                 (19 * 216, 3840)]:
        rows.append(_prefix_route(n, p))
        print(rows[-1])
    for n in (1024, 2048, 4096, 8192, 13056, 24064):
        rows.append(_causal_route(n))
        print(rows[-1])
    for lengths in ([24064, 300, 900, 13056, 5000, 120, 2100], [18000, 113, 113, 9000],
                    [3000, 2500, 700, 2049, 400]):
        rows.append(_own_route(lengths))
        print(rows[-1])
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ids", default="")
    p.add_argument("--first", type=int, default=8)
    p.add_argument("--count", type=int, default=6)
    p.add_argument("--scale", default="0.1")
    p.add_argument("--random-model", default="qwen3-4b")
    p.add_argument("--precision", default="fp8")
    p.add_argument("--workdir", default="/tmp/quail-e2e")
    p.add_argument("--routes", action="store_true")
    p.add_argument("--out", default="profile_query.json", help="file name under $OUT")
    p.add_argument("--switch-interval", type=float, default=None,
                   help="sys.setswitchinterval for the run (how long a thread waiting on the "
                        "GIL waits at most; Python's default 0.005 s)")
    args = p.parse_args(argv)
    setup_logging()
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    res = Results(args.out)
    if args.routes:
        res.section("routes", routes)
    if args.ids:
        res.section("queries", run_queries, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
