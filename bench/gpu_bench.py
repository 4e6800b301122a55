"""GPU benchmark (one command on the H200): filter and join workloads, quail (bf16, fp8) vs
transformers (sdpa, bf16, padded) and transformers with hand-rolled prefix reuse, on random
weights of the Qwen3-4B and Qwen3-0.6B shapes. Writes gpu.json and gpu.md under
$OUT (or bench/results/local) and prints the table last.

    python -m bench gpu --filter-docs 20000 --join-anchors 500 --join-partners 1100
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import sys

import torch

from bench.gpu import hf_runs, quail_runs
from bench.gpu.workloads import (
    filter_flops,
    filter_work,
    join_flops,
    join_requested_tokens,
    join_work,
)
from quail_engine.infer.gpu.engine import build_gpu_model
from quail_testing.gpu import env_info, measure_ceilings, setup_logging
from quail_testing.random_weights import random_state_dict, shape_config
from quail_testing.results import Results, out_dir

log = logging.getLogger("gpu_bench")


REFERENCE_PEAKS = {"bf16": 805.0, "fp8": 1471.0}  # facts.md, measured on this card kind
DTYPE_OPTIONS = {"bf16": dict(fp8=False), "fp8": dict(fp8=True),
                 "fp8-mlp": dict(fp8=True, fp8_proj=("gate_up", "down")),
                 "fp8-block": dict(fp8=True, fp8_block=True)}


def _row(workload, model, dtype, engine, run, flops, peak, note=""):
    """mfu: model FLOPs / time / the facts.md peak of the dtype's GEMM (bf16 805, fp8 1,471
    TFLOP/s); mfu_run_peak: against the peak measured at the start of this run."""
    secs = run["seconds"]
    ref_peak = REFERENCE_PEAKS["bf16" if dtype == "bf16" else "fp8"]
    return {"workload": workload, "model": model, "dtype": dtype, "engine": engine,
            "fresh_tokens_per_s": round(run["fresh_tokens"] / secs),
            "requested_tokens_per_min": round(run["requested_tokens"] / secs * 60),
            "mfu": round(flops / secs / (ref_peak * 1e12), 4),
            "mfu_run_peak": round(flops / secs / (peak * 1e12), 4), "seconds": round(secs, 2),
            "note": note, "detail": run}


def quail_rows(name, args, peaks, fw, jw) -> list[dict]:
    config = shape_config(name)
    rows = []
    sd = random_state_dict(config, seed=0, device="cuda", dtype=torch.bfloat16)
    for dtype in args.dtypes:
        opts = DTYPE_OPTIONS[dtype]
        model = build_gpu_model(config, sd, kv_fraction=args.kv_fraction, **opts)
        peak = peaks["fp8_rowwise_tflops" if opts["fp8"] else "bf16_tflops"]
        if fw is not None:
            run = quail_runs.run_filter(model, fw, args.token_budget)
            rows.append(_row("filter", name, dtype, "quail", run, filter_flops(config, fw), peak,
                             f"{len(fw.docs)} docs"))
            log.info("%s", rows[-1])
        if jw is not None:
            run = quail_runs.run_join(model, jw, args.token_budget)
            run["requested_tokens"] = join_requested_tokens(jw)
            rows.append(_row("join", name, dtype, "quail", run, join_flops(config, jw), peak,
                             f"{len(jw.anchors)} anchors x {len(jw.partners)} partners"))
            log.info("%s", rows[-1])
        del model
        gc.collect()
        torch.cuda.empty_cache()
    return rows


def hf_rows(name, args, peaks, fw, jw) -> list[dict]:
    config = shape_config(name)
    model, cfg = hf_model_and_cfg(config)
    peak = peaks["bf16_tflops"]
    rows = []
    if fw is not None:
        sub = type(fw)(fw.docs[: args.hf_filter_docs])
        run = hf_runs.run_filter(model, sub)
        rows.append(_row("filter", name, "bf16", "transformers", run, filter_flops(config, sub),
                         peak, f"{len(sub.docs)} docs"))
        log.info("%s", rows[-1])
    if jw is not None:
        run = hf_runs.run_join_plain(model, jw, args.hf_join_pairs)
        per_pair = join_flops(config, type(jw)(jw.anchors[:1], jw.partners[:1]), reuse=False)
        rows.append(_row("join", name, "bf16", "transformers", run,
                         per_pair * run["pairs_measured"], peak,
                         f"measured {run['pairs_measured']} pairs, rates extrapolated"))
        log.info("%s", rows[-1])
        run = hf_runs.run_join_reuse(model, cfg, jw, args.reuse_anchors)
        sub = type(jw)(jw.anchors[: args.reuse_anchors], jw.partners)
        rows.append(_row("join", name, "bf16", "transformers-reuse", run, join_flops(config, sub),
                         peak, f"measured {args.reuse_anchors} anchors x {len(jw.partners)} "
                         "partners, rates extrapolated"))
        log.info("%s", rows[-1])
    del model
    gc.collect()
    torch.cuda.empty_cache()
    return rows


def hf_model_and_cfg(config):
    return hf_runs.hf_model(config)


def table(rows) -> str:
    head = ("| workload | model | dtype | engine | fresh tokens/s | requested tokens/min | MFU | "
            "note |\n|---|---|---|---|---:|---:|---:|---|")
    lines = [f"| {r['workload']} | {r['model']} | {r['dtype']} | {r['engine']} | "
             f"{r['fresh_tokens_per_s']:,} | {r['requested_tokens_per_min']:,} | "
             f"{100 * r['mfu']:.1f}% | {r['note']} |" for r in rows if "workload" in r]
    return "\n".join([head, *lines])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="qwen3-4b,qwen3-0.6b")
    p.add_argument("--dtypes", default="bf16,fp8")
    p.add_argument("--engines", default="quail,transformers")
    p.add_argument("--workloads", default="filter,join")
    p.add_argument("--filter-docs", type=int, default=20000)
    p.add_argument("--join-anchors", type=int, default=500)
    p.add_argument("--join-partners", type=int, default=1100)
    p.add_argument("--hf-filter-docs", type=int, default=2048)
    p.add_argument("--hf-join-pairs", type=int, default=64)
    p.add_argument("--reuse-anchors", type=int, default=2)
    p.add_argument("--token-budget", type=int, default=None)
    p.add_argument("--kv-fraction", type=float, default=0.5)
    args = p.parse_args(argv)
    args.dtypes = args.dtypes.split(",")
    setup_logging()
    res = Results("gpu.json")
    res.data["command"] = " ".join(["python -m bench gpu", *(argv or sys.argv[1:])])
    res.section("env", env_info)
    peaks = res.section("ceilings", measure_ceilings)
    rows: list[dict] = []
    workloads = args.workloads.split(",")
    for name in args.models.split(","):
        vocab = shape_config(name).vocab_size
        fw = filter_work(args.filter_docs, vocab) if "filter" in workloads else None
        jw = (join_work(args.join_anchors, args.join_partners, vocab) if "join" in workloads
              else None)
        if "quail" in args.engines:
            got = res.section(f"quail_{name}", quail_rows, name, args, peaks, fw, jw)
            rows += got if isinstance(got, list) else [got]
        if "transformers" in args.engines:
            got = res.section(f"hf_{name}", hf_rows, name, args, peaks, fw, jw)
            rows += got if isinstance(got, list) else [got]
        res.data["rows"] = [r for r in rows if "workload" in r]
        res.path.write_text(json.dumps(res.data, indent=1, default=str))
    md = table(rows)
    (out_dir() / "gpu.md").write_text(md + "\n")
    print(json.dumps(peaks))
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
