"""Cold start: how long the first `quail query` on a machine spends loading its model, with the
GPU kernels compiled inside that load (nothing kept) and after `quail warmup` kept them under
the quail cache root (quail_engine/infer/gpu/compile_log.py), each step a fresh process:

1. `fresh`: a first query with an empty cache root (its load compiles every kernel variant);
2. `warmup`: `quail warmup` into a second empty cache root (what an install step would run);
3. `after_warmup`: the first query over that root: `first_query_load_s`, what a user waits.

`held_before` records what the machine held beforehand (Triton's default cache, the quail
kernel cache, TRITON_CACHE_DIR, versions): a machine that compiled before is not a fresh one.
`--kernels DIR` starts step 3's root from a copied kernel cache instead of running step 2 (a
cache shipped to the machine). Model conversions are shared between the roots (a GGUF is
converted once), so only the kernels differ.

    python -m bench cold_start --random-model qwen3-4b --tokenizer .carry/tok-smollm2 \\
        --device cuda --precision fp8 --out $OUT/cold_start.json
    python -m bench cold_start --model smollm2-135m --device cpu   # the code path on a CPU
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SQL = "SELECT id FROM docs WHERE AI_FILTER(PROMPT('Is this text about cardiology? {0}', body))"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="default", help="the model spec (default: embedded)")
    p.add_argument("--random-model", choices=("qwen3-4b", "tiny"),
                   help="a random-weight model directory written with --tokenizer instead")
    p.add_argument("--tokenizer", type=Path, default=ROOT / ".carry" / "tok-smollm2")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--precision", default="fp8")
    p.add_argument("--rows", type=int, default=64, help="rows of the query's table")
    p.add_argument("--kernels", type=Path, help="a kernel cache to start step 3 from")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/quail-cold-start"))
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per step")
    p.add_argument("--out", type=Path, help="result file (default: $OUT or bench/results/local)")
    args = p.parse_args(argv)

    from quail_testing.results import out_dir

    work = args.workdir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    model = _model(args, work)
    table = _table(work, args.rows)
    result = {"command": "python -m bench cold_start " + " ".join(sys.argv[1:]),
              "model": args.random_model or args.model, "device": args.device,
              "precision": args.precision, "held_before": held_before()}
    steps = {"fresh": _query(args, model, table, _root(work, "fresh"), "fresh")}
    warm_root = _root(work, "warm")
    if args.kernels:
        shutil.copytree(args.kernels, warm_root / "kernels")
        steps["warmup"] = {"copied_kernels": str(args.kernels)}
    else:
        steps["warmup"] = _warmup(args, model, warm_root)
    steps["after_warmup"] = _query(args, model, table, warm_root, "after_warmup")
    result.update(steps=steps, first_query_load_s=steps["after_warmup"].get("load_s"),
                  fresh_first_query_load_s=steps["fresh"].get("load_s"))
    path = args.out or out_dir() / "cold_start.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("first_query_load_s", "fresh_first_query_load_s")}))
    return 0 if all("error" not in s for s in steps.values()) else 1


def held_before() -> dict:
    """What the machine held before the run: Triton's default cache and the quail kernel cache
    (kernel folders and bytes), TRITON_CACHE_DIR, and the versions the kernels are keyed by."""
    from quail_engine.infer.gpu import compile_log
    from quail_engine.settings import cache_path

    held = {"triton_cache_dir_env": os.environ.get("TRITON_CACHE_DIR"),
            "triton_default_cache": compile_log.cache_inventory(Path.home() / ".triton" / "cache"),
            "quail_kernel_cache": compile_log.cache_inventory(cache_path("kernels"))}
    try:
        import torch
        held.update(torch=torch.__version__, cuda=torch.version.cuda,
                    gpu=torch.cuda.get_device_name() if torch.cuda.is_available() else None)
        import triton
        held["triton"] = triton.__version__
    except ImportError as exc:
        held["import_error"] = str(exc)
    return held


def _model(args, work: Path) -> str:
    if not args.random_model:
        return args.model
    from quail_testing.model_dir import write_model_dir

    path = work / f"model-{args.random_model}"
    write_model_dir(path, args.tokenizer, args.random_model == "tiny",
                    "cuda" if args.device == "cuda" else "cpu")
    return str(path)


def _table(work: Path, rows: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = work / "docs.parquet"
    body = [f"Report {i}: chest pain and palpitations after exercise, day {i}."
            for i in range(rows)]
    pq.write_table(pa.table({"id": list(range(rows)), "body": body}), path)
    return path


def _root(work: Path, name: str) -> Path:
    """An empty cache root sharing the user's converted models (a conversion is not a cold
    start's cost: `quail warmup` or any earlier run pays it once)."""
    from quail_engine.settings import cache_path

    root = work / f"cache-{name}"
    root.mkdir()
    models = cache_path("models")
    models.mkdir(parents=True, exist_ok=True)
    (root / "models").symlink_to(models.resolve(), target_is_directory=True)
    return root


def _env(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_DIR"}
    env.update(QUAIL_CACHE_DIR=str(root), DO_NOT_TRACK="1", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, (env.get("PYTHONPATH"), str(ROOT)))))
    return env


def _run(cmd: list[str], root: Path, timeout: float, log: Path) -> dict:
    t0 = time.perf_counter()
    with log.open("w") as out:
        try:
            code = subprocess.run(cmd, cwd=ROOT, env=_env(root), stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = 124
    step = {"process_s": round(time.perf_counter() - t0, 2), "exit": code}
    if code:
        step["error"] = log.read_text()[-1500:]
    return step


def _query(args, model: str, table: Path, root: Path, name: str) -> dict:
    """One `quail query` in a fresh process over `root`: its load_s from the report."""
    from quail_engine.infer.gpu import compile_log

    report = root.parent / f"{name}.report.json"
    cmd = [sys.executable, "-m", "quail_engine", "-v", "query", "-e", SQL, "--dialect",
           "snowflake", "--model", model, "--device", args.device, "--precision",
           args.precision, "--table", f"docs={table}", "--no-cache", "--report", str(report),
           "--output", str(root.parent / f"{name}.parquet"), "-q"]
    before = compile_log.cache_inventory(root / "kernels")
    step = _run(cmd, root, args.timeout, root.parent / f"{name}.log")
    if report.exists():
        rep = json.loads(report.read_text())
        step.update(load_s=round(rep["load_s"], 2), wall_s=round(rep["wall_s"], 2),
                    rows=rep.get("rows"), load_phases=rep.get("load_phases", {}))
    step.update(kernels_before=before["kernels"],
                kernels_after=compile_log.cache_inventory(root / "kernels")["kernels"],
                compiled=_compiled(root.parent / f"{name}.log"))
    return step


def _warmup(args, model: str, root: Path) -> dict:
    cmd = [sys.executable, "-m", "quail_engine", "warmup", "--model", model, "--device",
           args.device, "--precision", args.precision, "--json"]
    log = root.parent / "warmup.log"
    step = _run(cmd, root, args.timeout, log)
    for line in reversed(log.read_text().splitlines()):
        if line.startswith("{"):
            step.update(json.loads(line))
            break
    return step


def _compiled(log: Path) -> dict:
    """Triton kernels the step's log says it compiled and loaded from the cache."""
    text = log.read_text() if log.exists() else ""
    return {"compiled": text.count("Triton compiled"), "loaded": text.count("Triton loaded")}


if __name__ == "__main__":
    raise SystemExit(main())
