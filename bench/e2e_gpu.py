"""End-to-end GPU bench: the product as a user runs it (`quail query`, optionally `dbt build`)
beside the engine alone, on the same random-weight Qwen3-4B-shaped model and the same corpora.

One command on the H200 (the device call carries .carry/e2e, made by --prepare on the CPU):
  (a) writes the model directory in Hugging Face layout (config.json, model.safetensors, the
      embedded default model's tokenizer, vocabulary 262,144),
  (b) writes seeded Parquet corpora (filter: docs of ~300 tokens; join: reports of ~4,000
      tokens x terms of ~15 tokens),
  (c) runs `quail query --device cuda --precision P --no-cache --report r.json` in a
      subprocess on a filter and a join query (Snowflake SQL), and reads its report,
  (d) runs the engine alone (bench/gpu/quail_runs.py) on the same token shapes,
and writes e2e-gpu.json + e2e-gpu.md under $OUT (or bench/results/local).
Rates count time after the model is loaded (QUAIL-B's rule); load_s and wall_s are beside them.

    python -m bench e2e-gpu --prepare                      # once, on the CPU (also .carry/tok-smollm2)
    python -m bench e2e-gpu --device cpu --tiny --paths query,engine,dbt   # CPU smoke run
  on the H200 (device call: carry [".carry/e2e"]):
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
        .carry/e2e/whl/*.whl && PYTHONPATH=/tmp/site python3 -m bench e2e-gpu \
        --filter-docs 2000 --join-anchors 2 --paths query,engine,dbt --load-check
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import pass_summary
from bench.gpu.e2e_data import prepare_wheels, write_corpora
from quail_testing.gpu import setup_logging
from quail_testing.model_dir import prepare_tokenizer, write_model_dir
from quail_testing.results import Results, out_dir

ROOT = Path(__file__).resolve().parents[1]

log = logging.getLogger("e2e_gpu")

FILTER_SQL = "SELECT id FROM docs WHERE AI_FILTER(PROMPT('Is this review positive? {0}', text))"
JOIN_SQL = ("SELECT r.id, t.id FROM reports r JOIN terms t ON AI_FILTER(PROMPT("
            "'Does the report {0} mention the reaction {1}?', r.text, t.term))")
DBT_DOCS = "{{ config(materialized='table', quail_dialect='duckdb') }}\n" \
           "select * from read_parquet('%s')\n"
DBT_FILTER = "{{ config(materialized='table') }}\nselect id from {{ ref('docs') }}\n" \
             "where AI_FILTER(PROMPT('Is this review positive? {0}', text))\n"


class Clock:
    def __init__(self, budget_s: float | None):
        self.start, self.budget_s = time.perf_counter(), budget_s

    def left(self) -> float:
        return float("inf") if self.budget_s is None else \
            self.budget_s - (time.perf_counter() - self.start)


def _env(workdir: Path, name: str) -> dict:
    env = dict(os.environ, DO_NOT_TRACK="1", PYTHONUNBUFFERED="1",
               QUAIL_CACHE_DIR=str(workdir / f"cache-{name}"))  # a first run: nothing cached
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    return env


def _run(cmd: list[str], env: dict, timeout: float, log_file: Path) -> tuple[int, float]:
    """(exit code, seconds) of `cmd` in its own process group; killed past `timeout`."""
    t0 = time.perf_counter()
    with log_file.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = 124
    return code, round(time.perf_counter() - t0, 2)


def _rates(row: dict, fresh: float, requested: float, run_s: float, sol: float | None) -> dict:
    row.update(fresh_tokens=int(fresh), requested_tokens=int(requested), run_s=round(run_s, 3),
               fresh_tokens_per_s=round(fresh / run_s) if run_s > 0 else None,
               requested_tokens_per_min=round(requested / run_s * 60) if run_s > 0 else None,
               sol_seconds=round(sol, 4) if sol else None,
               x_sol=round(run_s / sol, 2) if sol and run_s > 0 else None)
    return row


def query_row(args, workload: str, precision: str, paths: dict, clock: Clock,
              sharing: str = "on", tree: Path | None = None, turn: int = 0) -> dict:
    """`quail query` as a user runs it; times from its --report. `sharing`: prefix sharing
    across rows on (the product's default) or off (QUAIL_PREFIX_SHARING=0). `tree`: run the
    packages in that directory (quail_engine and quail_kernels of other code, for an A/B in
    one call) instead of this checkout's; `turn` numbers the alternating runs."""
    name = f"query-{workload}-{precision}" + ("" if sharing == "on" else "-sharing-off") + (
        f"-{'other' if tree else 'head'}-{turn}" if args.ab else "")
    report = args.workdir / f"{name}.report.json"
    report.unlink(missing_ok=True)
    tables = ["docs"] if workload == "filter" else ["reports", "terms"]
    cmd = [sys.executable, "-m", "quail_engine", "-v", "query", "-e",
           FILTER_SQL if workload == "filter" else JOIN_SQL, "--dialect", "snowflake",
           "--model", str(args.model_dir), "--device", args.device, "--precision", precision,
           "--no-cache", "--report", str(report), "--output",
           str(args.workdir / f"{name}.parquet"), "-q"]
    for t in tables:
        cmd += ["--table", f"{t}={paths[t]}"]
    log_file = (out_dir() if args.keep_logs else args.workdir) / f"{name}.log"
    env = dict(_env(args.workdir, name), QUAIL_PREFIX_SHARING="1" if sharing == "on" else "0")
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join((str(tree.resolve()), env["PYTHONPATH"]))
    code, process_s = _run(cmd, env, min(args.query_timeout, clock.left()), log_file)
    row = {"workload": workload, "path": "query", "precision": precision, "sharing": sharing,
           "exit": code, "process_s": process_s}
    if args.ab:
        row.update(tree="other" if tree else "head", turn=turn)
    if code != 0 or not report.exists():
        row["error"] = log_file.read_text()[-1500:]
        return row
    rep = json.loads(report.read_text())
    row.update(wall_s=round(rep["wall_s"], 3), load_s=round(rep["load_s"], 3), rows=rep["rows"],
               op_seconds=round(sum(o["seconds"] for o in rep["operators"]), 3),
               sol_seconds_sustained=rep.get("sol_seconds_sustained"), device=rep["device"],
               model=rep["model"], phases=rep.get("phases"),
               engine_s=round(sum(o.get("engine_s", 0.0) for o in rep["operators"]), 3),
               host_wait_s=round(sum(o.get("host_wait_s", 0.0) for o in rep["operators"]), 3),
               gpu_pass_s=round(sum(o.get("gpu_pass_s", 0.0) for o in rep["operators"]), 3),
               est_seconds=round(sum(o.get("est_seconds") or 0.0 for o in rep["operators"]),
                                 3),
               kv_hit_tokens=rep.get("kv_hit_tokens"),
               # when each phase ran (the model loads lazily inside one of them)
               timeline_phases=(rep.get("timeline") or {}).get("phases"),
               passes=pass_summary.summarize(rep, *pass_summary.model_and_device(
                   args.model_dir, args.device, precision)))
    return _rates(row, rep["fresh_tokens"], rep["requested_tokens"],
                  rep["wall_s"] - rep["load_s"], rep["sol_seconds"])


def dbt_row(args, precision: str, paths: dict, clock: Clock) -> dict:
    """`dbt build` of a one-AI-model project (profile type quail) over the filter corpus; times
    from the adapter's log lines (load, and the AI model's rows/tokens/seconds)."""
    name = f"dbt-filter-{precision}"
    project = args.workdir / name
    (project / "models").mkdir(parents=True, exist_ok=True)
    (project / "dbt_project.yml").write_text(
        "name: e2e\nversion: '1.0'\nconfig-version: 2\nprofile: e2e\nmodel-paths: [models]\n"
        "flags: {send_anonymous_usage_stats: false}\n")
    (project / "profiles.yml").write_text(json.dumps({"e2e": {"target": "dev", "outputs": {"dev": {
        "type": "quail", "path": str(project / "e2e.duckdb"), "dialect": "snowflake",
        "model": str(args.model_dir), "device": args.device, "precision": precision,
        "cache_dir": "off", "threads": 1}}}}))
    (project / "models" / "docs.sql").write_text(DBT_DOCS % paths["docs"])
    (project / "models" / "ai_docs.sql").write_text(DBT_FILTER)
    (project / "e2e.duckdb").unlink(missing_ok=True)
    shutil.rmtree(project / "logs", ignore_errors=True)  # dbt appends to its log
    cmd = [sys.executable, "-c", "from dbt.cli.main import cli; cli()", "build", "--project-dir",
           str(project), "--profiles-dir", str(project), "--log-path", str(project / "logs")]
    code, process_s = _run(cmd, _env(args.workdir, name), min(args.query_timeout, clock.left()),
                           project / "stdout.log")
    row = {"workload": "filter", "path": "dbt", "precision": precision, "exit": code,
           "process_s": process_s}
    text = (project / "logs" / "dbt.log").read_text() if (project / "logs" / "dbt.log").exists() \
        else ""
    if args.keep_logs and text:
        (out_dir() / f"{name}.log").write_text(text)
    load = re.search(r"loaded model .* in ([\d.]+) s", text)
    done = re.search(r"ai_docs: (\d+) rows, \d+ prompts run, \d+ answers from cache, (\d+) "
                     r"tokens, ([\d.]+) s", text)
    if code != 0 or not done:
        row["error"] = (project / "stdout.log").read_text()[-1500:]
        return row
    load_s, wall_s = float(load.group(1)) if load else 0.0, float(done.group(3))
    row.update(wall_s=wall_s, load_s=load_s, rows=int(done.group(1)))
    return _rates(row, int(done.group(2)), int(done.group(2)), wall_s - load_s, None)


def engine_rows(args, precision: str, tokenizer, paths: dict) -> list[dict]:
    """The engine alone (GpuRunner over GpuCausalLM, loaded by infer/gpu/load.py) on the
    corpora's token shapes."""
    import pyarrow.parquet as pq
    import torch

    from bench.gpu import quail_runs
    from bench.gpu.workloads import FilterWork, JoinWork
    from quail_engine.infer.factory import PRECISIONS
    from quail_engine.infer.gpu.engine import attach_arena
    from quail_engine.infer.gpu.load import load_checkpoint
    from quail_engine.infer.gpu.model import GpuCausalLM
    from quail_engine.infer.gpu.paged_kv import PagedKVArena

    cuda = args.device == "cuda"
    t0 = time.perf_counter()
    state, _, config = load_checkpoint(str(args.model_dir), args.device)
    model = GpuCausalLM(config, state, device=args.device,
                        dtype=torch.bfloat16 if cuda else torch.float32, **PRECISIONS[precision])
    del state
    if cuda:
        torch.cuda.empty_cache()
        attach_arena(model, args.kv_fraction)
        torch.cuda.synchronize()
    else:
        model.arena = PagedKVArena(config.num_layers, config.num_kv_heads, config.head_dim, 512,
                                   64, torch.float32, model.device)
    load_s = time.perf_counter() - t0
    enc = tokenizer.encode_batch
    rows = []
    if "filter" in args.workloads:
        tail = enc([" Is this review positive? Answer yes or no.\nAnswer:"])[0]
        docs = [t + tail for t in enc(pq.read_table(paths["docs"])["text"].to_pylist())]
        run = quail_runs.run_filter(model, FilterWork(docs), args.token_budget)
        rows.append(_engine_row("filter", precision, run, load_s, config,
                                _filter_work(docs), cuda))
    if "join" in args.workloads:
        head = enc(["Does the report"])[0]
        anchors = [head + t for t in enc(pq.read_table(paths["reports"])["text"].to_pylist())]
        partners = [t + enc([" ? Answer yes or no.\nAnswer:"])[0]
                    for t in enc(pq.read_table(paths["terms"])["term"].to_pylist())]
        work = JoinWork(anchors, partners)
        run = quail_runs.run_join(model, work, args.token_budget)
        run["requested_tokens"] = sum(len(a) + len(p) for a in anchors for p in partners)
        rows.append(_engine_row("join", precision, run, load_s, config,
                                _join_work(anchors, partners), cuda))
    del model
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return rows


def _filter_work(docs):
    from quail_engine.plan.cost import Work, request_work

    return sum((request_work(0, len(d), False) for d in docs), Work())


def _join_work(anchors, partners):
    from quail_engine.plan.cost import Work, request_work

    total = Work()
    for a in anchors:
        total = total + request_work(len(a), 0, True)
        for p in partners:
            total = total + request_work(len(a), len(p), False)
    return total


def _engine_row(workload, precision, run, load_s, config, work, cuda) -> dict:
    """Speed of light as the session reports it: datasheet peaks of the precision run (and
    the sustained ones beside)."""
    from quail_engine.plan.cost import ModelSpec, num_passes, seconds
    from quail_engine.plan.device import device_spec

    row = {"workload": workload, "path": "engine", "precision": precision,
           "wall_s": round(load_s + run["seconds"], 3), "load_s": round(load_s, 3),
           "passes": run.get("passes"), "gpu_pass_s": round(run.get("gpu_pass_s", 0.0), 3)}
    sol = None
    if cuda:
        spec, passes = ModelSpec.from_attrs(config), num_passes(work.fresh_tokens)
        sol = seconds(spec, device_spec("cuda", precision, datasheet=True), work, passes)
        row["sol_seconds_sustained"] = round(
            seconds(spec, device_spec("cuda", precision), work, passes), 4)
    return _rates(row, run["fresh_tokens"], run["requested_tokens"], run["seconds"], sol)


def table(rows: list[dict]) -> str:
    head = ("| workload | path | precision | fresh tokens/s | requested tokens/min | wall s | "
            "load s | run s | SoL s | x SoL | note |\n"
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    fmt = lambda v, f="{:,}": "-" if v is None else f.format(v)  # noqa: E731
    lines = [f"| {r['workload']} | {r['path']}{_sharing(r)} | {r['precision']} | "
             f"{fmt(r.get('fresh_tokens_per_s'))} | {fmt(r.get('requested_tokens_per_min'))} | "
             f"{fmt(r.get('wall_s'), '{:.2f}')} | {fmt(r.get('load_s'), '{:.2f}')} | "
             f"{fmt(r.get('run_s'), '{:.2f}')} | {fmt(r.get('sol_seconds'), '{:.3g}')} | "
             f"{fmt(r.get('x_sol'), '{:.1f}')} | {_note(r)} |" for r in rows]
    return "\n".join([head, *lines])


def ab_table(rows: list[dict]) -> str:
    """Per query shape, each tree's median run seconds (model load excluded) and head's over
    the other's, when the query path ran as an A/B (--ab)."""
    groups: dict[tuple, dict[str, list[float]]] = {}
    for r in rows:
        if r.get("tree") and r.get("run_s"):
            key = (r["workload"], r["precision"], r["sharing"])
            groups.setdefault(key, {}).setdefault(r["tree"], []).append(r["run_s"])
    if not groups:
        return ""
    lines = ["", "| workload | precision | sharing | head run s | other run s | head / other |",
             "|---|---|---|---|---|---|"]
    for (workload, precision, sharing), by in groups.items():
        head, other = (statistics.median(by[t]) if by.get(t) else None
                       for t in ("head", "other"))
        ratio = f"{head / other:.3f}" if head and other else "-"
        lines.append(f"| {workload} | {precision} | {sharing} | {by.get('head')} | "
                     f"{by.get('other')} | {ratio} |")
    return "\n".join(lines) + "\n"


def pass_tables(rows: list[dict]) -> str:
    """Where each query's GPU time went, pass by pass: the per-kind summaries of the `query`
    rows (an engine row's `passes` is its count of forward passes, not a summary)."""
    md = ""
    for r in rows:
        if r.get("path") != "query" or not isinstance(r.get("passes"), dict):
            continue
        passes = pass_summary.markdown(r["passes"])
        if passes:
            md += (f"\n\nGPU passes of the {r['workload']} query ({r['precision']}"
                   f"{_sharing(r)}):\n\n" + "\n".join(passes))
    return md


def _sharing(r: dict) -> str:
    return " (sharing off)" if r.get("sharing") == "off" else ""


def _note(r: dict) -> str:
    if r.get("error"):
        return f"FAILED (exit {r.get('exit')})"
    parts = [f"{r['fresh_tokens']:,} fresh / {r['requested_tokens']:,} requested tokens"]
    if "process_s" in r:
        parts.append(f"process {r['process_s']:.1f} s")
    if "rows" in r:
        parts.append(f"{r['rows']:,} rows out")
    return "; ".join(parts)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--tiny", action="store_true",
                   help="a tiny Qwen3-shaped model and short documents (CPU smoke)")
    p.add_argument("--precisions", default="fp8,bf16")
    p.add_argument("--workloads", default="filter,join")
    p.add_argument("--sharing", default="on",
                   help="query rows with prefix sharing across rows on, off, or on,off")
    p.add_argument("--paths", default="query,engine", help="query, engine, dbt (comma list)")
    p.add_argument("--filter-docs", type=int, default=20000)
    p.add_argument("--join-anchors", type=int, default=500)
    p.add_argument("--join-partners", type=int, default=1100)
    p.add_argument("--load-check", action="store_true",
                   help="time the GPU loader vs the CPU load path (bf16 and fp8) and compare "
                        "the models they build")
    p.add_argument("--load-check-fp32", action="store_true",
                   help="--load-check's comparison on a float32 copy of the weights (fp8)")
    p.add_argument("--copy-sweep", default="", help="threads:MiB,... of the file->GPU copy")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/quail-e2e"))
    p.add_argument("--carry", type=Path, default=ROOT / ".carry" / "e2e",
                   help="tok/ (gzipped tokenizer) and whl/ (wheels) for the GPU machine")
    p.add_argument("--prepare", action="store_true",
                   help="write --carry's tok/ and whl/, and tok-smollm2/ beside it (the decode, "
                        "grammar and cold-start benches' tokenizer), and stop (on the CPU, "
                        "with network)")
    p.add_argument("--query-timeout", type=float, default=400.0)
    p.add_argument("--budget-s", type=float, default=None,
                   help="skip what would start past this many seconds")
    p.add_argument("--kv-fraction", type=float, default=0.5)
    p.add_argument("--token-budget", type=int, default=None)
    p.add_argument("--keep-logs", action="store_true", help="subprocess logs under $OUT")
    p.add_argument("--ab", type=Path, default=None, metavar="DIR",
                   help="A/B the query path against the quail_engine and quail_kernels "
                        "packages in DIR (e.g. `git archive REV quail_engine quail_kernels`): "
                        "each query runs --ab-rounds times per tree, the trees alternating")
    p.add_argument("--ab-rounds", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for key in ("precisions", "workloads", "paths", "sharing"):
        setattr(args, key, [v for v in getattr(args, key).split(",") if v])
    if args.device == "cpu":
        args.precisions = ["bf16"]  # fp8 runs only on the GPU path
        args.token_budget = args.token_budget or 256  # the GPU runner needs one off the GPU
    args.model_dir = args.workdir / ("model-tiny" if args.tiny else "model-qwen3-4b")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    setup_logging()
    if args.prepare:
        log.info("wrote %s, %s and %s", prepare_tokenizer(args.carry / "tok"),
                 prepare_tokenizer(args.carry.parent / "tok-smollm2", "smollm2-135m",
                                   gzipped=False),
                 prepare_wheels(args.carry / "whl"))
        return 0
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # the engine path's kernels on the CPU
    from quail_engine.infer.tokenizer import load_tokenizer

    clock = Clock(args.budget_s)
    res = Results("e2e-gpu.json")
    res.data["command"] = " ".join(["python -m bench e2e-gpu", *(argv or sys.argv[1:])])
    if args.device == "cuda":
        from quail_testing.gpu import env_info
        res.section("env", env_info)
    args.workdir.mkdir(parents=True, exist_ok=True)
    res.section("model_dir", write_model_dir, args.model_dir, args.carry / "tok", args.tiny,
                args.device, args.seed)
    tokenizer = load_tokenizer(args.model_dir)
    lengths = dict(doc_tokens=(20, 40), report_tokens=(100, 200)) if args.tiny else {}
    paths = res.section("corpora", write_corpora, args.workdir / "data", tokenizer,
                        args.filter_docs, args.join_anchors, args.join_partners, args.seed,
                        **lengths)
    if args.copy_sweep:
        from bench.gpu.load_check import copy_sweep
        res.section("copy_sweep", copy_sweep, args.model_dir,
                    [tuple(int(x) for x in s.split(":")) for s in args.copy_sweep.split(",")])
    if args.load_check:
        from bench.gpu.load_check import check_load
        res.section("load_check", check_load, args.model_dir, ["bf16", "fp8"])
    if args.load_check_fp32:  # the same weights stored in float32 (twice the bytes to read)
        from bench.gpu.load_check import check_load
        fp32_dir = args.workdir / "model-qwen3-4b-fp32"
        res.section("model_dir_fp32", write_model_dir, fp32_dir, args.carry / "tok", args.tiny,
                    args.device, args.seed, "float32")
        res.section("load_check_fp32", check_load, fp32_dir, ["fp8"])
    rows: list[dict] = []

    def add(key, fn, *a):
        if clock.left() < 20:
            log.warning("skipping %s: budget spent", key)
            return
        got = res.section(key, fn, *a)
        rows.extend(r for r in (got if isinstance(got, list) else [got]) if "workload" in r)
        res.data["rows"] = rows
        res.path.write_text(json.dumps(res.data, indent=1, default=str))

    for precision in args.precisions:
        for workload in args.workloads:
            for sharing in args.sharing if "query" in args.paths else ():
                suffix = "" if sharing == "on" else "_sharing_off"
                if not args.ab:
                    add(f"query_{workload}_{precision}{suffix}", query_row, args, workload,
                        precision, paths, clock, sharing)
                    continue
                for turn in range(args.ab_rounds):
                    for tree in (None, args.ab):
                        add(f"query_{workload}_{precision}{suffix}_"
                            f"{'other' if tree else 'head'}_{turn}", query_row, args,
                            workload, precision, paths, clock, sharing, tree, turn)
        if "engine" in args.paths:
            add(f"engine_{precision}", engine_rows, args, precision, tokenizer, paths)
        if "dbt" in args.paths and "filter" in args.workloads:
            add(f"dbt_{precision}", dbt_row, args, precision, paths, clock)
    md = table(rows) + ab_table(rows) + pass_tables(rows)
    (out_dir() / "e2e-gpu.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
