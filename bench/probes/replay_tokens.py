"""The tokens a QUAIL-B query would compute on the H200, from a CPU replay: the same bench path
as the device run (override, token ledger, the GPU engine's host side over a tiny model whose
forward only packs the batch: host_overhead.packing_engine, the device's tokenizer and arena
size), so a change to the planner or executor shows its fresh tokens, minimum and rows without a
GPU. Per query: rows, fresh tokens, the minimum, and per operator its fresh tokens.

    python -m bench.probes.replay_tokens IMDB-10,IMDB-9 [--pages 5947] [--skip-head]

`--skip-head`: the LM head's log-probabilities are zeros instead of the tiny model's (on the CPU
its full-vocabulary normalizer dominates a label-scoring query; on the GPU it is a small GEMM),
so the printed seconds are the host side's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import torch

from bench.probes.engine_gaps import engine_gaps
from bench.quailb.resol import ROOT, replay_model
from bench.quailb.run import parse_sample
from quail_testing.quailb.queries import QUERIES, tables_read
from quail_testing.quailb.suite import open_suite


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ids", help="comma-separated query ids")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/quail-probe"))
    ap.add_argument("--carry", type=Path, default=ROOT / ".carry" / "e2e")
    ap.add_argument("--pages", type=int, default=5947, help="KV arena pages (the device run's)")
    ap.add_argument("--scale", default="0.1", help="0.1 | 0.5 | 1.0 (the device run's)")
    ap.add_argument("--sample", default="", help="TABLE=N[,TABLE=N] (the device run's)")
    ap.add_argument("--skip-head", action="store_true",
                    help="zero log-probabilities instead of the tiny model's LM head")
    args = ap.parse_args(argv)
    if args.skip_head:
        from quail_engine.infer import runner as cpu_runner
        from quail_engine.infer.gpu import runner as gpu_runner

        def zeros(model, hidden, columns, rows_per_chunk=1024):
            return torch.zeros((hidden.shape[0], len(columns)), dtype=torch.float32)
        cpu_runner.head_log_probs = gpu_runner.head_log_probs = zeros

    from bench.probes.host_overhead import packing_engine
    from quail_engine.infer import factory

    factory.load_engine = lambda spec, device="cpu", precision="bf16", tokenizer=None, **_: \
        packing_engine(spec, args.pages, tokenizer)
    # each query's answer cache fresh, as in the timed table (gpu_table.run_table): a file
    # grown over earlier replays made its stores slower (~200 MB for BIO-2)
    shutil.rmtree(args.workdir / "answers", ignore_errors=True)
    scale = args.scale.removeprefix("sf")
    suite = open_suite(args.workdir, scale, model=str(replay_model(args.workdir, args.carry)),
                       override=True, ledger=True, sample=parse_sample(args.sample, scale),
                       tables=tables_read(args.ids.split(",")))
    engine = suite.load()
    for qid in args.ids.split(","):
        t0 = time.perf_counter()
        row = suite.run(QUERIES[qid])
        print(f"{qid} rows {row.get('rows')} digest {row.get('digest')} fresh {row.get('fresh_tokens')} minimum "
              f"{engine.minimum().tokens} ({time.perf_counter() - t0:.1f} s)"
              + (f" error {row['error']}" if row.get("error") else ""), flush=True)
        if suite.last_report:  # the engine's waits for the host (the fake forward's batches)
            print("    gaps", json.dumps(engine_gaps(suite.last_report)), flush=True)
            print("    phases s", json.dumps({k: v for k, v in suite.last_report["phases"].items()
                                               if v >= 0.05}), flush=True)
        for op in (suite.last_report or {}).get("operators") or []:
            print(f"    #{op['op']} {op['kind']}: rows {op['rows_in']} -> {op['rows_out']}, "
                  f"fresh {op['fresh_tokens']}, minimum {op.get('minimum_tokens')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
