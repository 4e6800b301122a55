"""`python -m bench quailb`: QUAIL-B's 42 queries (quail_testing/quailb/queries.py, Snowflake
SQL) and the BigQuery / Databricks twins of 14 of them (twins.py there) over the generated
corpora (data.py there), each through one `quail query` session (suite.py there), checked to run
planned (`unplanned` 0 in the report) and to return the benchmark's output columns; a twin must
return its Snowflake query's rows.

CPU mode (`--cpu`: the embedded default model, tiny scale, twins included) is the CI check
(tests/e2e/test_quailb_cpu.py). The GPU run (`--device cuda --random-model qwen3-4b --override
--scale sf0.1`, bench/quailb/README.md) records per query the time with model load excluded,
fresh / requested / minimum tokens (quail_testing/quailb/ledger.py), the speed of light of the minimum work on the
H200 datasheet (and on its measured sustained ceiling), `x_sol`, and a transformers baseline on a
sample of the query's prompts, extrapolated (baseline.py); then suite totals and the geometric
mean of `x_sol`. `--resume FILE` skips the queries FILE has, so the suite runs as several device
calls; `--budget-s` starts no query past that many seconds. `--device cpu --random-model tiny`
is the dry run of the GPU table on the CPU."""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from quail_testing.quailb import data
from quail_testing.quailb.queries import ORDER, QUERIES
from quail_testing.quailb.suite import KNOWN_GAPS, open_suite
from quail_testing.quailb.twins import TWINS

ROOT = Path(__file__).resolve().parents[2]


def parse_sample(text: str, scale: str) -> dict[str, int]:
    """"reports=200,terms=500" -> {"reports": 200, "terms": 500}, checked against `scale`."""
    sample: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, n = part.partition("=")
        if not eq or not n.strip().isdigit():
            raise ValueError(f"{part!r} is not TABLE=N")
        sample[name.strip()] = int(n)
    data.check_sample(sample, scale)
    return sample


def twin_check(rows: list[dict]) -> None:
    """Marks each twin ok only if it returned its Snowflake query's rows (same digest)."""
    snowflake = {r["id"]: r for r in rows if r["dialect"] == "snowflake" and "digest" in r}
    for r in rows:
        if r["dialect"] == "snowflake" or "digest" not in r or r["id"] not in snowflake:
            continue
        r["same_rows"] = r["digest"] == snowflake[r["id"]]["digest"]
        if not r["same_rows"]:
            r["ok"] = False
            r["error"] = (f"rows differ from the Snowflake query ({r['rows']} vs "
                          f"{snowflake[r['id']]['rows']})")


def markdown(result: dict) -> str:
    lines = [f"QUAIL-B {result['mode']} at scale {result['scale']} ({result['model']}), "
             f"load {result['load_before']} -> {result['load_after']}", "",
             "| query | dialect | ok | rows | fresh tokens | wall s | note |",
             "|---|---|---|---|---|---|---|"]
    for r in result["queries"]:
        note = r.get("error", "") + (f" (known gap: {r['known_gap']})" if r.get("known_gap")
                                     else "") + (f" [{r['twin_note']}]" if r.get("twin_note")
                                                 else "")
        lines.append(f"| {r['id']} | {r['dialect']} | {'yes' if r['ok'] else 'NO'} | "
                     f"{r.get('rows', '')} | {r.get('fresh_tokens', '')} | {r['wall_s']} | "
                     f"{note} |")
    return "\n".join(lines) + "\n"


def _cases(ids: list[str], with_twins: bool) -> list[Any]:
    out: list[Any] = []
    for qid in ids:
        out.append(QUERIES[qid])
        if with_twins:
            out += [t for t in TWINS.values() if t.id == qid]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="CPU mode: the embedded default model")
    ap.add_argument("--device", default="", choices=("", "cpu", "cuda"),
                    help="the GPU table's mode on this device (timing, tokens, x_sol)")
    ap.add_argument("--scale", default="tiny",
                    help="tiny | 0.1 | 0.5 | 1.0 (an 'sf' in front is accepted)")
    ap.add_argument("--model", default="default")
    ap.add_argument("--random-model", default="", choices=("", "tiny", "qwen3-4b"),
                    help="write a random-weight model directory of this shape and use it")
    ap.add_argument("--precision", default="")
    ap.add_argument("--only", default="", help="comma-separated query ids (default: all 42)")
    ap.add_argument("--twins", default=None, action=argparse.BooleanOptionalAction,
                    help="also the BigQuery/Databricks twins (default: on with --cpu)")
    ap.add_argument("--override", action="store_true",
                    help="answers drawn at the benchmark's selectivities (random weights)")
    ap.add_argument("--resume", default="", help="a previous result file: skip its queries")
    ap.add_argument("--redo", default="", help="comma-separated ids --resume's file has that "
                    "run again (a re-time after a fix)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start no query after this many seconds")
    ap.add_argument("--baseline-sample", type=int, default=64,
                    help="prompts per query run through transformers (0: no baseline)")
    ap.add_argument("--sample", default="", help="TABLE=N[,TABLE=N]: a table's first N rows, "
                    "a uniform sample (the timed table; e.g. BIO-4 at sf1.0 on 200 reports)")
    ap.add_argument("--workdir", default="", help="corpora, model dir and caches (default tmp)")
    ap.add_argument("--out", default="", help="write the JSON result here")
    args = ap.parse_args(argv)
    args.scale = args.scale.removeprefix("sf")
    if args.scale not in data.ROWS:
        ap.error(f"--scale must be one of {sorted(data.ROWS)}")
    if not args.cpu and not args.device:
        ap.error("give --cpu (the CI check) or --device cpu|cuda (the timed table)")
    try:
        args.sample = parse_sample(args.sample, args.scale)
    except ValueError as exc:
        ap.error(f"--sample {args.sample!r}: {exc}")
    if args.sample and not args.device:
        ap.error("--sample is for the timed table (--device)")
    ids = [q.strip() for q in args.only.split(",") if q.strip()] or list(ORDER)
    if args.device:
        from bench.quailb.gpu_table import run_table
        return run_table(args, ids)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    twins = True if args.twins is None else args.twins
    with tempfile.TemporaryDirectory(prefix="quailb-") as work:
        suite = open_suite(work, args.scale, model=args.model, override=args.override)
        rows = []
        for case in _cases(ids, twins):
            row = suite.run(case)
            if case.id in KNOWN_GAPS:
                row["known_gap"] = KNOWN_GAPS[case.id]
            if getattr(case, "notes", ""):
                row["twin_note"] = case.notes
            rows.append(row)
    twin_check(rows)
    result = {"mode": "cpu", "scale": args.scale, "model": args.model,
              "override": args.override, "load_before": round(load_before, 2),
              "load_after": round(os.getloadavg()[0], 2),
              "wall_s": round(time.perf_counter() - t0, 2), "queries": rows}
    if args.override and suite.engine:
        stats = suite.engine[0].override_stats
        result["override_stats"] = {"replaced": stats.replaced,
                                    "unmatched_boolean": stats.unmatched_boolean}
    print(markdown(result))
    if "override_stats" in result:
        print("override:", json.dumps(result["override_stats"]))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    failed = [r["id"] for r in rows if not r["ok"] and r["id"] not in KNOWN_GAPS]
    return 1 if failed else 0


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None
