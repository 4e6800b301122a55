"""Wall time of the README's main command on this CPU: cold (a fresh QUAIL_CACHE_DIR, so the
model is converted and the CPU probed) and warm (the same cache, `--no-cache` so every answer is
computed), each with the load average beside it, natively and with the ISA capped to AVX2
(`ONEDNN_MAX_CPU_ISA=AVX2`, and the same cap for ATen and MKL) to stand in for a CPU without
bf16 dot products.

    python -m bench readme-cpu --label after --isa native --isa avx2

`--tree DIR` runs the code of another checkout (e.g. `git archive <commit> | tar -x -C DIR`),
so a before/after pair measures two fixed commits, not a working tree others are editing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = [sys.executable, "-m", "quail_engine", "query", "examples/snowflake/reviews.sql", "--dialect", "snowflake",
           "--table", "reviews=examples/data/reviews.csv", "--quiet"]
ISA_ENV = {"native": {},
           "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
                    "MKL_ENABLE_INSTRUCTIONS": "AVX2"}}


def timed(argv: list[str], env: dict[str, str], tree: Path) -> dict:
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-2000:])
    return {"seconds": round(seconds, 1), "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2), "rc": proc.returncode,
            "rows": proc.stdout.count("\n")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isa", action="append", choices=sorted(ISA_ENV))
    ap.add_argument("--label", default="")
    ap.add_argument("--warm-runs", type=int, default=2)
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    args = ap.parse_args(argv)
    rows = []
    for isa in args.isa or ["native"]:
        with tempfile.TemporaryDirectory(prefix="quail-cold-") as cache:
            env = {**os.environ, **ISA_ENV[isa], "QUAIL_CACHE_DIR": cache,
                   "PYTHONPATH": str(args.tree)}
            rows.append({"label": args.label, "isa": isa, "run": "cold", **timed(COMMAND, env, args.tree)})
            for _ in range(args.warm_runs):
                rows.append({"label": args.label, "isa": isa, "run": "warm --no-cache",
                             **timed([*COMMAND, "--no-cache"], env, args.tree)})
            for row in rows[-1 - args.warm_runs:]:
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
