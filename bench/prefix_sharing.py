"""Prefix sharing across rows on an agent-trace table (issue 16): QUAIL-B's AGENT-1 filter
through `quail query`, with sharing on and off (QUAIL_PREFIX_SHARING=1/0) in the same run.

Rows are cumulative snapshots of agent trajectories (each snapshot the previous one plus a few
turns), so most prompt tokens are beginnings other rows share. Per run, from the query's
report: fresh tokens run, KV hit tokens, the minimum tokens (each distinct beginning once) and
KV regret = (fresh - minimum) / fresh; time after the model load against the speed of light
of the minimum work (minimum tokens and their causal attention pairs; datasheet peaks on a
GPU, the measured CPU peak here). With --hf, the transformers baseline (sdpa, bf16, padded
batches, every row's whole prompt) on the same prompts, on a GPU.

CPU (the embedded default model; a small table of QUAIL-B's agent-trace shape):
    python -m bench prefix-sharing --trajectories 2 --snapshots 16
H200 (random Qwen3-4B weights, the embedded tokenizer; device call carrying [".carry/e2e"],
made once on the CPU by `python -m bench e2e-gpu --prepare`; writes $OUT/prefix_sharing.{json,md}):
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \\
        .carry/e2e/whl/*.whl && PYTHONPATH=/tmp/site python3 -m bench prefix-sharing \\
        --device cuda --precision fp8 --quailb-rows 300 --hf
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench import pass_summary
from bench.results_io import write_result
from quail_testing.quailb.data import _VOCAB, AGENT_TURN_INTERVAL, SEED, _text, tables
from quail_testing.quailb.queries import QUERIES
from quail_testing.results import out_dir

log = logging.getLogger("bench.prefix_sharing")
ROOT = Path(__file__).resolve().parents[1]
SQL = QUERIES["AGENT-1"].sql


def small_traces(trajectories: int, snapshots: int, words: int, seed: int = SEED) -> pa.Table:
    """QUAIL-B's agent_traces shape (quail_testing/quailb/data.py: a user turn, then assistant and tool
    turns, a snapshot every AGENT_TURN_INTERVAL assistant turns) with short turns, for a CPU."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for t in range(trajectories):
        pieces = [f"[USER]\n{_text(rng, _VOCAB['agent'], 2 * words)}"]
        for turn in range(1, snapshots * AGENT_TURN_INTERVAL + 1):
            n = int(rng.integers(words // 2, words + 1))
            pieces.append(f"[ASSISTANT]\n{_text(rng, _VOCAB['agent'], n)}")
            pieces.append(f"[TOOL]\n{_text(rng, _VOCAB['agent'], n // 2 + 1)}")
            if turn % AGENT_TURN_INTERVAL == 0:
                rows.append({"id": f"at{t:04d}-t{turn:03d}", "trace": "\n\n".join(pieces)})
    random.Random(seed).shuffle(rows)  # a table's order is not the trajectories' order
    return pa.Table.from_pylist(rows)


def quailb_traces(num_rows: int) -> pa.Table:
    """The first `num_rows` snapshots of QUAIL-B's sf0.1 agent_traces (up to 24k tokens)."""
    table = tables("0.1")["agent_traces"]
    return table.slice(0, num_rows).select(["id", "trace"])


def run_query(args, path: Path, sharing: bool) -> dict:
    """One `quail query` subprocess; its report's numbers."""
    import subprocess

    name = "on" if sharing else "off"
    report = args.workdir / f"report-{name}.json"
    report.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "quail_engine", "query", "-e", SQL, "--dialect", "snowflake",
           "--model", str(args.model), "--device", args.device, "--no-cache", "-q",
           "--report", str(report), "--table", f"agent_traces={path}",
           "--output", str(args.workdir / f"rows-{name}.parquet")]
    if args.precision:
        cmd += ["--precision", args.precision]
    env = dict(os.environ, QUAIL_PREFIX_SHARING="1" if sharing else "0", DO_NOT_TRACK="1",
               PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT))
                                          if p))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"sharing": sharing, "exit": 124, "error": f"timed out after {args.timeout} s"}
    row = {"sharing": sharing, "exit": proc.returncode,
           "process_s": round(time.perf_counter() - t0, 2)}
    if proc.returncode != 0 or not report.exists():
        row["error"] = (proc.stdout + proc.stderr)[-2000:]
        return row
    rep = json.loads(report.read_text())
    op = rep["operators"][0]
    run_s = rep["wall_s"] - rep["load_s"]
    row.update(rows=rep["rows"], wall_s=round(rep["wall_s"], 2), load_s=round(rep["load_s"], 2),
               run_s=round(run_s, 2), fresh_tokens=op["fresh_tokens"],
               requested_tokens=op["requested_tokens"], kv_hit_tokens=op["kv_hit_tokens"],
               minimum_tokens=op["minimum_tokens"],
               minimum_attention_pairs=op["minimum_attention_pairs"],
               kv_regret=None if op["kv_regret"] is None else round(op["kv_regret"], 4),
               device=rep["device"], model=rep["model"])
    spec, device = model_and_device(args)
    sol = sol_minimum(spec, device, op)
    row.update(sol_minimum_s=round(sol, 4) if sol else None,
               x_sol_minimum=round(run_s / sol, 2) if sol else None,
               passes=pass_summary.summarize(rep, spec, device))
    row["answers"] = sorted(pq.read_table(args.workdir / f"rows-{name}.parquet")
                            .column(0).to_pylist())
    return row


def model_and_device(args):
    """(plan.cost ModelSpec of the model, the device's datasheet peaks), or (None, None) for a
    model without a config.json to read its shape from."""
    from quail_engine.infer.loader import resolve_model_dir

    return pass_summary.model_and_device(resolve_model_dir(str(args.model)), args.device,
                                         args.precision or "bf16")


def sol_minimum(spec, device, op: dict) -> float | None:
    """Speed of light of the minimum work: each distinct beginning's tokens once."""
    from quail_engine.plan.cost import Work, num_passes, seconds

    if spec is None:
        return None
    work = Work(fresh_tokens=op["minimum_tokens"],
                attention_pairs=op["minimum_attention_pairs"])
    return seconds(spec, device, work, num_passes(work.fresh_tokens))


def hf_baseline(args, table: pa.Table) -> dict:
    """transformers on every row's whole prompt (the question after the trace), bf16, GPU."""
    from bench.gpu.hf_runs import hf_model, run_filter
    from bench.gpu.workloads import FilterWork
    from quail_engine.infer.loader import resolve_model_dir
    from quail_engine.infer.models import config_from_hf
    from quail_engine.infer.tokenizer import load_tokenizer

    model_dir = Path(resolve_model_dir(str(args.model)))
    config = config_from_hf(json.loads((model_dir / "config.json").read_text()))
    tokenizer = load_tokenizer(model_dir)
    question = SQL.split("PROMPT('", 1)[1].split("{0}")[0]
    docs = [tokenizer.encode(f"{t}\n\n{question}") for t in table.column("trace").to_pylist()]
    step = max(1, len(docs) // args.hf_rows) if args.hf_rows else 1
    sample = docs[::step]
    model, _ = hf_model(config)
    got = run_filter(model, FilterWork(sample), batch=args.hf_batch)
    total, measured = sum(map(len, docs)), sum(map(len, sample))
    got.update(rows=len(docs), rows_measured=len(sample), total_tokens=total,
               seconds_measured=round(got["seconds"], 3),
               seconds=round(got["seconds"] * total / measured, 3),
               extrapolated=step > 1)  # by tokens, from every `step`-th row
    return got


def markdown(result: dict) -> str:
    head = ("| sharing | rows | run s | fresh tok | kv hit tok | minimum tok | KV regret | "
            "SOL(min) s | x SOL(min) |\n|---|---|---|---|---|---|---|---|---|")
    lines = [f"# Prefix sharing, agent traces ({result['device']})", "",
             f"`{result['command']}`, {result['date']}, load average {result['load_average']}",
             "", f"table: {result['table']}", "", head]
    for r in result["runs"]:
        if "error" in r:
            lines.append(f"| {r['sharing']} | FAILED exit {r['exit']} |||||||")
            continue
        lines.append(f"| {'on' if r['sharing'] else 'off'} | {r['rows']} | {r['run_s']} | "
                     f"{r['fresh_tokens']:,} | {r['kv_hit_tokens']:,} | {r['minimum_tokens']:,} |"
                     f" {r['kv_regret']} | {r['sol_minimum_s']} | {r['x_sol_minimum']} |")
    for r in result["runs"]:
        table = pass_summary.markdown(r.get("passes") or {})
        if table:
            lines += ["", f"GPU passes, sharing {'on' if r['sharing'] else 'off'} (the report's "
                      "pass log; SoL on the datasheet peaks):", "", *table]
    lines += ["", f"answers equal with and without sharing: {result['answers_equal']}"]
    hf = result.get("hf")
    if hf and "seconds" in hf:
        how = (f"extrapolated by tokens from {hf['rows_measured']} of {hf['rows']} rows "
               f"({hf['seconds_measured']} s measured)") if hf.get("extrapolated") else \
            "every row"
        lines.append(f"transformers baseline (bf16, sdpa, batches of {hf['batch']}, no reuse): "
                     f"{hf['seconds']} s, {how}")
    elif hf:
        lines.append(f"transformers baseline: {hf}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--model", default=None,
                   help="model spec or directory (default: 'default' on the CPU, a random "
                        "Qwen3-4B-shaped directory written from .carry/e2e/tok on a GPU)")
    p.add_argument("--precision", default=None, help="quail query --precision")
    p.add_argument("--trajectories", type=int, default=2)
    p.add_argument("--snapshots", type=int, default=16, help="snapshots per trajectory")
    p.add_argument("--words", type=int, default=8, help="words per assistant turn (at most)")
    p.add_argument("--quailb-rows", type=int, default=0,
                   help="use the first N rows of QUAIL-B's sf0.1 agent_traces instead")
    p.add_argument("--modes", default="off,on")
    p.add_argument("--hf", action="store_true", help="the transformers baseline (GPU)")
    p.add_argument("--hf-batch", type=int, default=4)
    p.add_argument("--hf-rows", type=int, default=32,
                   help="transformers on every k-th row (about this many), extrapolated by "
                        "tokens to the table (0: every row)")
    p.add_argument("--timeout", type=float, default=540.0)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/quail-prefix-sharing"))
    p.add_argument("--out", default=None, help="result file (default bench/results/...)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.model is None and args.device == "cuda":
        from quail_testing.model_dir import write_model_dir
        args.model = args.workdir / "model-qwen3-4b"
        write_model_dir(args.model, ROOT / ".carry" / "e2e" / "tok", False, "cuda")
    args.model = args.model or "default"
    table = quailb_traces(args.quailb_rows) if args.quailb_rows else \
        small_traces(args.trajectories, args.snapshots, args.words)
    path = args.workdir / "agent_traces.parquet"
    pq.write_table(table, path)
    if args.out is None and args.device == "cuda":  # the device machine's $OUT comes back
        args.out = out_dir() / "prefix-sharing-gpu.json"
    result = {
        "command": " ".join(["python -m bench prefix-sharing", *(argv or sys.argv[1:])]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": args.device,
        "table": (f"QUAIL-B sf0.1 agent_traces, first {args.quailb_rows} rows"
                  if args.quailb_rows else
                  f"{args.trajectories} trajectories x {args.snapshots} snapshots "
                  f"(every {AGENT_TURN_INTERVAL} turns, <= {args.words} words a turn)"),
        "rows": table.num_rows, "runs": [],
    }
    answers = []
    for mode in args.modes.split(","):  # the file is rewritten after each step (a device
        run = run_query(args, path, mode == "on")  # call cut short keeps what finished)
        answers.append(run.pop("answers", None))
        result["runs"].append(run)
        result["device"] = result["runs"][0].get("device", args.device)
        result["answers_equal"] = len({json.dumps(a) for a in answers if a is not None}) == 1
        result["load_average"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        write_result(result, "prefix-sharing-cpu", markdown, args.out)
    if args.hf:
        result["hf"] = hf_baseline(args, table)
        write_result(result, "prefix-sharing-cpu", markdown, args.out)
    return 0 if all("error" not in r for r in result["runs"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
