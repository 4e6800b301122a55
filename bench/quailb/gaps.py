"""Where each QUAIL-B query's time above the speed of light goes, from the committed device
results alone (bench/results/quailb-gpu.json and quailb-gpu-reports/): its run against the speed of
light of its minimum tokens (x_sol) split into host x kernel x work (as the table), and the
kernel part split by pass size: the GPU seconds of its large passes (>= LARGE tokens) against
their own speed of light, the small passes' likewise, and the share of GPU time the small ones
take. `floor` is what the query would reach with no host time, no work above the minimum and
every pass as fast as its large ones: the part of x_sol that only faster kernels can remove.
It is an optimistic bound where the small passes do other work than the large ones: AGENT-1's
small passes (short rows over long shared beginnings, attention-heavy) ran at 3.9x their speed
of light and its large ones at 2.9x; packed into large passes (session 20) they ran no faster.

    python -m bench.quailb.gaps [--out FILE.md]
    python -m bench.quailb.gaps --result bench/results/quailb-gpu-bio4-sf1.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from bench.pass_summary import passes
from bench.quailb import reports_dir
from quail_engine.plan.cost import ModelSpec, Work, seconds
from quail_engine.plan.device import gpu_spec
from quail_testing.random_weights import shape_config

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
LARGE = 16384  # tokens: a pass this large keeps the GEMMs at their sustained rate


def _sol(model, sheet, group: list[dict]) -> float:
    return sum(seconds(model, sheet, Work(fresh_tokens=p["tokens"],
                                          attention_pairs=p["attention_pairs"]))
               for p in group)


def gaps(result: dict, reports: Path) -> list[dict]:
    model = ModelSpec.from_attrs(shape_config("qwen3-4b"), weight_bytes=1.0)
    sheet = gpu_spec("NVIDIA H200", result.get("precision", "fp8"), datasheet=True)
    rows = []
    for r in result["queries"]:
        path = reports / f"{r['id']}-{r['dialect']}.json"
        if "run_s" not in r or not path.exists():
            continue
        logged = [p for p in passes(json.loads(path.read_text())) if p.get("gpu_s")]
        large = [p for p in logged if p["tokens"] >= LARGE]
        small = [p for p in logged if p["tokens"] < LARGE]
        gpu = sum(p["gpu_s"] for p in logged)
        sol_passes = _sol(model, sheet, logged)
        row = {"id": r["id"], "x_sol": r["x_sol"], "run_s": r["run_s"], "sol_s": r["sol_s"],
               "host": r["run_s"] / gpu if gpu else None,
               "kernel": gpu / sol_passes if sol_passes else None,
               "work": sol_passes / r["sol_s"] if r["sol_s"] else None,
               "passes": len(logged), "small_passes": len(small),
               "small_gpu_share": sum(p["gpu_s"] for p in small) / gpu if gpu else 0.0}
        for name, group in (("large", large), ("small", small)):
            s = _sol(model, sheet, group)
            row[f"{name}_x"] = sum(p["gpu_s"] for p in group) / s if s else None
        row["floor"] = row["large_x"] or row["kernel"]
        rows.append(row)
    return rows


def _f(x, digits=2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def markdown(result: dict, rows: list[dict]) -> str:
    run = sum(r["run_s"] for r in rows)
    sol = sum(r["sol_s"] for r in rows)
    floor_s = sum(r["floor"] * r["sol_s"] for r in rows)
    host_free = sum(r["run_s"] / r["host"] for r in rows if r["host"])
    kernel_only = sum(r["kernel"] * r["sol_s"] for r in rows if r["kernel"])
    lines = [
        "| query | x SoL | host | kernel | work | large passes x SoL | small passes x SoL | "
        "small passes (share of GPU s) | floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: -r["x_sol"]):
        lines.append(f"| {r['id']} | {_f(r['x_sol'])} | {_f(r['host'])} | {_f(r['kernel'])} | "
                     f"{_f(r['work'])} | {_f(r['large_x'])} | {_f(r['small_x'])} | "
                     f"{r['small_passes']} of {r['passes']} ({r['small_gpu_share']:.0%}) | "
                     f"{_f(r['floor'])} |")
    geo = math.exp(sum(math.log(r["floor"]) for r in rows) / len(rows))
    lines += ["", f"Suite ({len(rows)} queries): x_sol {run / sol:.2f}; with no host time "
              f"{host_free / sol:.2f}; with no host time and the minimum work (the kernels as "
              f"they run) {kernel_only / sol:.2f}; floor (no host time, minimum work, every "
              "pass as fast as "
              f"its query's large ones) {floor_s / sol:.2f} (geometric mean {geo:.2f})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--result", type=Path, default=RESULTS / "quailb-gpu.json")
    ap.add_argument("--reports", type=Path, default=None,
                    help="the rows' execution reports (default: RESULT-reports/ beside --result)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    result = json.loads(args.result.read_text())
    text = markdown(result, gaps(result, args.reports or reports_dir(args.result)))
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
