"""The timed QUAIL-B table (issue 15 item 3): `python -m bench quailb --device cuda ...`.

Per query: `run_s` = the query's wall time with model load excluded (the engine is loaded, and
warmed up, before the first query), fresh and requested tokens (the execution report), minimum
tokens (every distinct prompt prefix once, ledger.py), `sol_s` = the speed of light of that
minimum on the H200 datasheet (1,979 fp8 / 989 bf16 dense TFLOP/s, 4.8 TB/s) and
`sol_sustained_s` on the measured sustained ceiling (plan/device.py), `x_sol` = run_s / sol_s,
`x_sol_quailb` = run_s / the anchor's speed of light of the same work (sol_quailb.py: attention
at the bf16 rate) with the minimum's work counts (`min_work`), and the transformers baseline
(baseline.py), extrapolated from a sample. Suite totals: sums, sum(run_s) / sum(sol_s) and the
geometric mean of `x_sol`, and the same in the anchor's convention.

Resumable: the result file is rewritten after each query; a query is first written as started,
so one that a killed device call never finished is reported as such; the next call resumes from
that file and tries it once more, first (a query that cannot finish in one call is not retried
forever)."""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from bench import pass_summary
from bench.quailb import baseline, reports_dir, sol_quailb
from bench.quailb.run import ROOT, _cases, geomean, twin_check
from bench.results_io import machine
from quail_engine.infer.gpu import compile_log
from quail_testing.quailb import data
from quail_testing.quailb.queries import tables_read
from quail_testing.quailb.suite import open_suite
from quail_testing.results import out_dir

log = logging.getLogger("bench.quailb")
DATASHEET = "H200 datasheet (989 bf16 / 1,979 fp8 dense TFLOP/s, 4.8 TB/s)"


def _specs(engine: Any, precision: str):
    from quail_engine.plan.cost import ModelSpec
    from quail_engine.plan.device import gpu_spec

    fp8 = precision.startswith("fp8")
    model = ModelSpec.from_attrs(engine.config, name=engine.model_id,
                                 weight_bytes=1.0 if fp8 else 2.0)
    return model, gpu_spec("NVIDIA H200", precision, datasheet=True), gpu_spec("NVIDIA H200",
                                                                               precision)


def _speed_of_light(row: dict, minimum, specs) -> None:
    from quail_engine.plan.cost import num_passes, seconds

    model, sheet, sustained = specs
    passes = num_passes(minimum.work.fresh_tokens)
    row.update(prompts=minimum.prompts, min_tokens=minimum.tokens,
               min_work=sol_quailb.work_counts(minimum.work),
               sol_s=seconds(model, sheet, minimum.work, passes),
               sol_sustained_s=seconds(model, sustained, minimum.work, passes))
    if row.get("run_s") and row["sol_s"] > 0:
        row["x_sol"] = round(row["run_s"] / row["sol_s"], 3)
    quailb_sol(row, model, sheet)


def quailb_sol(row: dict, model, sheet) -> None:
    """`sol_quailb_s` and `x_sol_quailb` of a row from its `min_work` (none without it)."""
    from quail_engine.plan.cost import num_passes

    work = sol_quailb.work_of(row)
    if work is None:
        return
    row["sol_quailb_s"] = sol_quailb.seconds(model, sheet, work, num_passes(work.fresh_tokens))
    if row.get("run_s") and row["sol_quailb_s"] > 0:
        row["x_sol_quailb"] = round(row["run_s"] / row["sol_quailb_s"], 3)


def _where_time_went(row: dict, report: dict | None, specs, reports: Path) -> None:
    """The query's phases, operators and GPU passes (grouped against their own speed of light)
    into its row; the whole execution report beside the table, RESULT-reports/ID-DIALECT.json."""
    if not report:
        return
    model, sheet, _ = specs
    row["phases"] = report.get("phases")
    row["ops"] = [{k: o.get(k) for k in ("op", "kind", "rows_in", "rows_out", "fresh_tokens",
                                         "requested_tokens", "kv_hit_tokens", "est_seconds",
                                         "seconds", "gpu_pass_s", "alloc_retries")}
                 for o in report["operators"]]
    row["passes"] = pass_summary.summarize(report, model, sheet)
    reports.mkdir(parents=True, exist_ok=True)
    (reports / f"{row['id']}-{row['dialect']}.json").write_text(json.dumps(report, default=str))


def totals(rows: list[dict]) -> dict:
    done = [r for r in rows if "run_s" in r]
    run, sol = sum(r["run_s"] for r in done), sum(r.get("sol_s", 0.0) for r in done)
    hf = [r for r in done if "hf_s" in r]
    out = {"queries": len(done), "ok": sum(1 for r in done if r.get("ok")),
           "run_s": round(run, 3), "sol_s": float(f"{sol:.4g}"),
           "fresh_tokens": sum(r.get("fresh_tokens", 0) for r in done),
           "requested_tokens": sum(r.get("requested_tokens", 0) for r in done),
           "min_tokens": sum(r.get("min_tokens", 0) for r in done),
           "x_sol": round(run / sol, 2) if sol > 0 else None,
           "x_sol_geomean": _round(geomean([r.get("x_sol") for r in done]))}
    anchor = [r for r in done if r.get("sol_quailb_s")]
    if anchor:  # the anchor's convention, over the rows that have it
        run_q, sol_q = sum(r["run_s"] for r in anchor), sum(r["sol_quailb_s"] for r in anchor)
        out.update(queries_quailb=len(anchor), sol_quailb_s=float(f"{sol_q:.4g}"),
                   x_sol_quailb=round(run_q / sol_q, 2),
                   x_sol_quailb_geomean=_round(geomean([r.get("x_sol_quailb")
                                                         for r in anchor])))
        if len(anchor) < len(done):  # ours over the same queries, like for like
            out["x_sol_same_queries"] = round(run_q / sum(r["sol_s"] for r in anchor), 2)
    if hf:
        out["hf_s"] = round(sum(r["hf_s"] for r in hf), 3)
        out["hf_speedup_geomean"] = _round(geomean([r["hf_s"] / r["run_s"] for r in hf
                                                    if r["run_s"] > 0]))
        out["hf_extrapolated"] = any(r.get("hf_extrapolated") for r in hf)
    return out


def gap(row: dict) -> dict | None:
    """A query's x SoL as the product of three factors: `host` = run s / the operators' GPU
    pass seconds (time the GPU waited: host work, the final statement), `kernel` = those
    seconds / the speed of light of the passes' own tokens (how fast the passes run), `work`
    = that speed of light / the minimum tokens' (work done beyond the minimum: KV recomputed,
    label tokens). None without operators or passes."""
    gpu = sum(o.get("gpu_pass_s") or 0.0 for o in row.get("ops") or [])
    passes = sum(p.get("sol_s", 0.0) for p in (row.get("passes") or {}).values())
    if not gpu or not passes or not row.get("sol_s") or "run_s" not in row:
        return None
    return {"host": round(row["run_s"] / gpu, 2), "kernel": round(gpu / passes, 2),
            "work": round(passes / row["sol_s"], 2), "gpu_s": round(gpu, 3)}


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def markdown(result: dict) -> str:
    fmt = lambda v, f="{:,}": "-" if v is None else f.format(v)  # noqa: E731
    lines = [f"QUAIL-B on {result['device']} at scale {result['scale']}: {result['model']} "
             f"({result['precision']}), override {result['override']}; speed of light of the "
             f"minimum tokens on the {DATASHEET}; model load {result.get('load_s')} s "
             "(excluded)"
             + "".join(f"; sampled: {t} {n:,} of {total:,} rows (the first, a uniform sample)"
                       for t, (n, total) in result.get("sample", {}).items()), "",
             f"`{result['command']}` on {result.get('machine', result['device'])}", "",
             "| query | dialect | ok | rows | run s | fresh tok | requested tok | min tok | "
             "SoL s | SoL sust. s | x SoL | x SoL (quail-bench) | GPU pass s | transformers s | "
             "note |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in result["queries"]:
        hf = fmt(r.get("hf_s"), "{:.3g}") + (" (extrapolated)" if r.get("hf_extrapolated")
                                              else "")
        note = r.get("error", "") or r.get("hf_note", "")
        gpu = sum(o.get("gpu_pass_s") or 0.0 for o in r.get("ops") or [])
        lines.append(
            f"| {r['id']} | {r['dialect']} | {'yes' if r.get('ok') else 'NO'} | "
            f"{fmt(r.get('rows'))} | {fmt(r.get('run_s'), '{:.3f}')} | "
            f"{fmt(r.get('fresh_tokens'))} | {fmt(r.get('requested_tokens'))} | "
            f"{fmt(r.get('min_tokens'))} | {fmt(r.get('sol_s'), '{:.3g}')} | "
            f"{fmt(r.get('sol_sustained_s'), '{:.3g}')} | {fmt(r.get('x_sol'), '{:.2f}')} | "
            f"{fmt(r.get('x_sol_quailb'), '{:.2f}')} | "
            f"{fmt(gpu if r.get('ops') else None, '{:.3g}')} | {hf} | {note} |")
    factors = [(r, gap(r)) for r in result["queries"]]
    lines += ["", "x SoL = host x kernel x work (`gap`): host = run s / the operators' GPU pass "
              "s, kernel = GPU pass s / the speed of light of the passes' own tokens, work = "
              "that / the speed of light of the minimum tokens", "",
              "| query | x SoL | host | kernel | work |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['id']} | {r['x_sol']:.2f} | {g['host']:.2f} | {g['kernel']:.2f} | "
              f"{g['work']:.2f} |" for r, g in factors if g]
    t = result["totals"]
    lines += ["", f"Suite ({t['queries']} queries, {t['ok']} ok): run {t['run_s']} s, speed of "
              f"light {t['sol_s']} s, x_sol {t['x_sol']} (geometric mean {t['x_sol_geomean']}); "
              f"tokens fresh {t['fresh_tokens']:,} / requested {t['requested_tokens']:,} / "
              f"minimum {t['min_tokens']:,}"
              + (f"; in quail-bench's convention (attention at the bf16 rate, sol_quailb.py) "
                 f"x_sol {t['x_sol_quailb']} (geometric mean {t['x_sol_quailb_geomean']}) over "
                 f"{t['queries_quailb']} queries"
                 + (f" (ours over the same queries: {t['x_sol_same_queries']})"
                    if "x_sol_same_queries" in t else "") if "x_sol_quailb" in t else "")
              + (f"; transformers {t['hf_s']} s"
                 + (" (extrapolated from samples)" if t.get("hf_extrapolated") else "")
                 + f", geometric-mean speedup {t['hf_speedup_geomean']}x" if "hf_s" in t
                 else "")]
    return "\n".join(lines) + "\n"


def run_table(args, ids: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    t0 = time.perf_counter()
    cuda = args.device == "cuda"
    work = Path(args.workdir or tempfile.mkdtemp(prefix="quailb-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work / "answers", ignore_errors=True)  # a query's answers: its own work
    model = args.model
    if args.random_model:
        from quail_testing.model_dir import write_model_dir
        model_dir = work / f"model-{args.random_model}"
        write_model_dir(model_dir, ROOT / ".carry" / "e2e" / "tok", args.random_model == "tiny",
                        args.device)
        model = str(model_dir)
    precision = args.precision or ("fp8" if cuda else "bf16")
    out = Path(args.out) if args.out else out_dir() / "quailb-gpu.json"
    result: dict[str, Any] = {"device": args.device, "scale": args.scale,
                              "model": args.random_model or args.model, "precision": precision,
                              "override": args.override, **_sampled(args.sample, args.scale),
                              "command": "python -m bench quailb "
                              + " ".join(sys.argv[1:]), "queries": []}
    earlier = json.loads(Path(args.resume).read_text()) if args.resume and \
        Path(args.resume).exists() else None
    for key in ("precision", "scale", "sample"):  # rows of another setting are not this run's
        if earlier is not None and earlier.get(key, result.get(key)) != result.get(key):
            log.info("not resuming from %s: its rows ran with %s %s, this run %s", args.resume,
                     key, earlier.get(key), result.get(key))
            earlier = None
    if earlier is not None:
        redo = set(filter(None, args.redo.split(",")))
        result["queries"] = [r for r in earlier["queries"] if r["id"] not in redo]
    selected = {(c.id, getattr(c, "dialect", "snowflake")) for c in _cases(ids, bool(args.twins))}
    retry = {(r["id"], r["dialect"]): r.get("attempts", 1) for r in result["queries"]
             if r.get("unfinished") and r.get("attempts", 1) < 2
             and (r["id"], r["dialect"]) in selected}
    result["queries"] = [r for r in result["queries"] if (r["id"], r["dialect"]) not in retry]
    done = {(r["id"], r["dialect"]) for r in result["queries"]}
    cases = [c for c in _cases(ids, bool(args.twins))
             if (c.id, getattr(c, "dialect", "snowflake")) not in done]
    cases.sort(key=lambda c: (c.id, getattr(c, "dialect", "snowflake")) not in retry)
    if not cases:
        return _finish(result, out)
    suite = open_suite(work, args.scale, model=model, device=args.device,
                       override=args.override, precision=precision if cuda else None,
                       ledger=True, tables=tables_read(c.id for c in cases),
                       sample=args.sample)
    start = time.perf_counter()
    engine = suite.load()
    result["load_s"] = round(time.perf_counter() - start, 2)
    result["machine"] = torch.cuda.get_device_name() if cuda else machine()
    specs = _specs(engine, precision)
    hf = baseline.load(Path(model), args.device) if args.baseline_sample else "no baseline"
    for case in cases:
        if args.budget_s is not None and time.perf_counter() - t0 > args.budget_s:
            log.info("budget spent: %s and later queries are left to --resume", case.id)
            break
        key = (case.id, getattr(case, "dialect", "snowflake"))
        marker = {"id": key[0], "dialect": key[1], "ok": False, "unfinished": True,
                  "attempts": retry.get(key, 0) + 1,
                  "error": "did not finish (the device call ended while it ran)"}
        result["queries"].append(marker)
        _save(result, out)
        suite.last_report = None
        compiled = compile_log.totals()
        row = suite.run(case)
        # Triton variants the engine's warm-up missed, compiled inside this query (in run_s)
        count, seconds = (a - b for a, b in zip(compile_log.totals(), compiled))
        row.update(compiles=count, compile_s=round(seconds, 3))
        if "run_s" in row:
            _speed_of_light(row, engine.minimum(), specs)
            _where_time_went(row, suite.last_report, specs, reports_dir(out))
            prompts, total = engine.sample()
            row.update(baseline.measure(hf, baseline.cap(prompts[:args.baseline_sample]), total))
        result["queries"][-1] = row
        _save(result, out)
        log.info("%s %s: %s s, x_sol %s", row["id"], row["dialect"], row.get("run_s"),
                 row.get("x_sol"))
    return _finish(result, out)


def _sampled(sample: dict[str, int], scale: str) -> dict:
    """The result's record of a sampled run: {table: [rows kept, rows at the scale]}."""
    return {"sample": {t: [n, data.ROWS[scale][t]] for t, n in sample.items()}} if sample \
        else {}


def _save(result: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str))
    tmp.replace(out)


def _finish(result: dict, out: Path) -> int:
    twin_check(result["queries"])
    result["totals"] = totals(result["queries"])
    _save(result, out)
    md = markdown(result)
    out.with_suffix(".md").write_text(md)
    print(md)
    return 0
