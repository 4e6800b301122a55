"""Planner benchmark on CPU: a two-filter + one-join query over a few hundred rows, run planned
(filter order by sampled selectivity, document KV shared, anchors chosen) and as written (DuckDB's
order, every prompt encoded in full), same engine, same run. Writes
bench/results/planner-cpu.json and .md.

    python -m bench planner-cpu --rows 200
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import sys
import time

import duckdb

from bench.results_io import write_result
from quail_engine.exec.config import SessionConfig
from quail_engine.exec.session import QuailSession
from quail_engine.infer.engine import LocalEngine
from quail_engine.plan.device import cpu_spec

PRODUCTS = [(1, "blender"), (2, "lamp"), (3, "headphones"), (4, "kettle")]
GOOD = ["I love this {p}, it works perfectly every single day.",
        "Great {p}, solid build and it looks lovely in our home.",
        "Excellent {p}, my whole family is very happy with it."]
BAD = ["This {p} broke after a week, a terrible purchase.",
       "Awful {p}, it stopped working and support never answered.",
       "The {p} is noisy and flimsy, I regret buying it."]
PRICE_GOOD = " And the price was very cheap."
PRICE_BAD = " Also far too expensive for what it is."

SQL = """
SELECT r.id, p.name
FROM reviews r JOIN products p
  ON AI_FILTER(PROMPT('Is the review {0} about a {1}?', r.review, p.name))
WHERE AI_FILTER(PROMPT('Is this review positive? {0}', r.review))
  AND AI_FILTER(PROMPT('Does this review mention the price? {0}', r.review))
ORDER BY r.id, p.name
"""


def make_data(con, rows: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    data = []
    for i in range(1, rows + 1):
        pid, name = rng.choice(PRODUCTS)
        good = rng.random() < 0.5
        text = f"Order {1000 + i}: " + rng.choice(GOOD if good else BAD).format(p=name)
        if rng.random() < 0.25:
            text += PRICE_GOOD if good else PRICE_BAD
        data.append((i, text, pid))
    con.execute("CREATE TABLE reviews (id INTEGER, review VARCHAR, product_id INTEGER)")
    con.executemany("INSERT INTO reviews VALUES (?, ?, ?)", data)
    con.execute("CREATE TABLE products (product_id INTEGER, name VARCHAR)")
    con.executemany("INSERT INTO products VALUES (?, ?)", PRODUCTS)


def run(engine, con, planned: bool, device) -> dict:
    config = SessionConfig(device="cpu", use_cache=False, plan=planned, share_kv=planned)
    session = QuailSession(con.cursor(), lambda: engine, config, device_spec=device)
    start = time.perf_counter()
    table = session.execute(SQL, "snowflake")
    wall = time.perf_counter() - start
    rep = session.report.to_json()
    return {"mode": "planned" if planned else "as_written", "wall_s": wall,
            "rows": table.num_rows, "fresh_tokens": rep["fresh_tokens"],
            "requested_tokens": rep["requested_tokens"], "sol_seconds": rep["sol_seconds"],
            "operators": rep["operators"], "plans": rep["plans"], "remarks": rep["remarks"],
            "result": [tuple(r.values()) for r in table.to_pylist()]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--model", default="default")
    ap.add_argument("--dtype", default=None, help="bfloat16 (default) or float32")
    ap.add_argument("--repeat", type=int, default=2, help="runs per mode (best wall kept)")
    ap.add_argument("--out", default=None, help="result file (default bench/results/planner-cpu.json)")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()
    device = cpu_spec(refresh=True)  # one probe for every SoL figure of this run
    engine = LocalEngine.load(args.model, device="cpu", dtype=args.dtype)
    con = duckdb.connect()
    make_data(con, args.rows)
    QuailSession(con.cursor(), lambda: engine).execute(  # warm-up
        "SELECT AI_FILTER(PROMPT('Is this review positive? {0}', review)) FROM reviews "
        "WHERE id <= 4", "snowflake")
    runs = []
    for i in range(args.repeat):  # ABBA order, so a drifting machine load hits both modes
        for mode in ((False, True) if i % 2 == 0 else (True, False)):
            runs.append(run(engine, con, planned=mode, device=device))
    baseline = min((r for r in runs if r["mode"] == "as_written"), key=lambda r: r["wall_s"])
    planned = min((r for r in runs if r["mode"] == "planned"), key=lambda r: r["wall_s"])
    same = set(baseline["result"]) == set(planned["result"])
    differing = len(set(baseline["result"]) ^ set(planned["result"]))
    all_walls = [(r["mode"], round(r["wall_s"], 2)) for r in runs]
    for r in runs:
        r.pop("result")
    result = {
        "benchmark": "planner_cpu", "date": dt.datetime.now(dt.timezone.utc).isoformat(),
        "command": " ".join(["python -m bench planner-cpu", *(argv or sys.argv[1:])]),
        "machine": {"nproc": os.cpu_count(), "probe_gflops": device.flops / 1e9,
                    "probe_gbytes_s": device.bandwidth / 1e9, "loadavg_before": load_before,
                    "loadavg_after": os.getloadavg(), "python": platform.python_version()},
        "model": engine.model_id, "dtype": args.dtype or "bfloat16", "rows": args.rows, "sql": SQL.strip(),
        "runs": [baseline, planned],
        "speedup_wall": baseline["wall_s"] / planned["wall_s"],
        "speedup_sol": baseline["sol_seconds"] / planned["sol_seconds"],
        "fresh_token_ratio": baseline["fresh_tokens"] / max(1, planned["fresh_tokens"]),
        "same_result_rows": same, "result_rows_differing": differing, "all_walls": all_walls,
    }
    write_result(result, "planner-cpu", markdown, args.out)
    return 0


def markdown(r: dict) -> str:
    lines = [f"# Planner benchmark (CPU, {r['model']} {r['dtype']}, {r['rows']} reviews x 4 "
             "products)", "",
             f"`{r['command']}` on {r['machine']['nproc']} cores, load average "
             f"{r['machine']['loadavg_before'][0]:.1f} before / "
             f"{r['machine']['loadavg_after'][0]:.1f} after.", "",
             "| mode | wall s | fresh tokens | requested tokens | SoL s | result rows |",
             "|---|---|---|---|---|---|"]
    for run_ in r["runs"]:
        lines.append(f"| {run_['mode']} | {run_['wall_s']:.1f} | {run_['fresh_tokens']} | "
                     f"{run_['requested_tokens']} | {run_['sol_seconds']:.2f} | {run_['rows']} |")
    lines += ["", f"Speed-up (wall): {r['speedup_wall']:.2f}x; speed-of-light ratio: "
              f"{r['speedup_sol']:.2f}x; fresh-token ratio: {r['fresh_token_ratio']:.2f}x; "
              f"same result rows: {r['same_result_rows']} "
              f"({r.get('result_rows_differing', 0)} rows differ).", "",
              f"Best of {len(r['all_walls']) // 2} runs per mode (ABBA order); all walls: "
              f"{r['all_walls']}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
