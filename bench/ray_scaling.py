"""The Ray backend's cost and gain: the same filter and join queries on the plain single-process
engine, on 1 Ray worker (the backend's overhead) and on N Ray workers (the scaling), same run.

Every configuration runs the same queries through QuailSession with no answer cache, on the
same corpora (bench/gpu/e2e_data.write_corpora: filter docs of ~300 tokens, a join of
~4,000-token reports x ~15-token terms; --tiny shrinks them). Each run asks documents no
earlier run asked (the engine's prefix cache would otherwise answer a repeat from its KV);
times count from after the model load and a warm-up query of each kind. `round_trip_s`: a
no-op call to every worker; `serialization`: what moving a batch's requests costs the driver
and the worker.

CPU (this machine; Ray's local instance gets this process's CPUs, each worker an equal share):
    python -m bench ray-scaling --tiny
GPU (one H200: N workers share it, each with its own replica and KV arena; random Qwen3-4B
weights from .carry/e2e/tok as bench/e2e_gpu.py makes them). The machine has no package index
and the Ray wheel is larger than one call's carry, so, once, on the CPU:
    python -m bench ray-scaling --prepare-ray .carry/ray     # .carry/ray/part0, part1
  (64 MiB per call: the parts and .carry/e2e's 49 MiB go in separate calls; what a call
  carried stays on the machine while it is held)
  device call 1 (carry [".carry/ray/part0"]) and call 2 (carry [".carry/e2e"]): `ls .carry`
  device call 3 (carry [".carry/ray/part1"]):
    cat .carry/ray/part0/ray-*.part0 .carry/ray/part1/ray-*.part1 > /tmp/ray-2.60.0-cp312-\
cp312-manylinux2014_x86_64.whl && python3 -m pip install -q --no-index --no-deps --target \
/tmp/site .carry/e2e/whl/*.whl .carry/ray/part1/*.whl /tmp/ray-*.whl && PYTHONPATH=/tmp/site \
    python3 -m bench ray-scaling --device cuda --precision fp8 --workers 1,2 \
        --filter-docs 5000 --join-anchors 20 --join-partners 1100 --repeat 1
Ray also imports jsonschema, which the GPU image lacks: install jsonschema,
jsonschema-specifications, referencing and rpds-py from .carry/e2e/whl with it (the 2026-12-02
run did so through bench/gpu/device_session.sh's `ray` step).
The CPU run writes bench/results/ray-scaling-cpu.json/.md with `uptime`'s load average;
the GPU run writes ray-scaling-gpu.json under $OUT (quail_testing/results.py).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import sys
import time
from pathlib import Path

from bench.results_io import write_result
from quail_testing.results import Results

ROOT = Path(__file__).resolve().parents[1]

log = logging.getLogger("ray_scaling")
QUERIES = {  # {lo}, {hi}: the id range of one run's rows (each run asks new documents)
    "filter": "SELECT id FROM docs WHERE id >= {lo} AND id < {hi} AND "
              "ai_filter('Is this review positive? ' || text)",
    "join": "SELECT r.id, t.id FROM reports r JOIN terms t ON ai_filter('Does the report ' || "
            "r.text || ' mention the reaction ' || t.term || '?') WHERE r.id >= {lo} AND "
            "r.id < {hi}",
}


def load_avg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def corpora(args, tokenizer):
    from bench.gpu.e2e_data import write_corpora

    sets = args.repeat + 1  # a warm-up set, then one set of documents per run
    return write_corpora(args.workdir / "data", tokenizer, args.filter_docs * sets,
                         args.join_anchors * sets, args.join_partners,
                         doc_tokens=args.doc_tokens, report_tokens=args.report_tokens)


def connection(paths):
    import duckdb

    con = duckdb.connect()
    for name, path in paths.items():
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet('{path}')")
    return con


def run_query(con, engine, text, sql: str) -> dict:
    from quail_engine.exec.session import QuailSession

    session = QuailSession(con.cursor(), lambda: engine, text=text)
    t0 = time.perf_counter()
    table = session.execute(sql)
    rep = session.report
    # less the wait for another process holding the device lock (a shared machine)
    wall = time.perf_counter() - t0 - rep.phases.get("device_wait", 0.0)
    return {"rows": table.num_rows, "wall_s": round(wall, 3), "fresh_tokens": rep.fresh_tokens,
            "tokens_per_s": round(rep.fresh_tokens / wall, 1) if wall else None,
            "answers": sorted(tuple(r.values()) for r in table.to_pylist())}


def round_trip(engine, reps: int) -> dict:
    """Seconds of a no-op call to every worker at once (median of `reps`)."""
    times = [engine.ping() for _ in range(reps)]
    return {"round_trip_s": round(statistics.median(times), 5)}


def serialization() -> dict:
    """What moving a shard costs, as RayEngine moves it (replicas/wire.py columns, pickled by
    Ray in the driver's engine thread before the worker starts; read and unpacked on the
    worker): a filter's batch (4,000 requests of 300 tokens sharing one readout) per million
    prompt tokens, and a join's (20,000 partner requests of 25 tokens over resident anchors)
    per request."""
    import pickle

    from quail_engine.infer.api import BooleanReadout, PrefixHandle, Request
    from quail_engine.replicas.wire import pack_requests, unpack_requests

    readout = BooleanReadout(calibration_tokens=tuple(range(30)))
    shapes = {
        "filter": [Request(tuple(range(i, i + 300)), readout) for i in range(4000)],
        "join": [Request(tuple(range(i % 1100, i % 1100 + 25)), readout,
                         PrefixHandle(i // 1100, 4000)) for i in range(20000)],
    }
    out: dict = {}
    for name, batch in shapes.items():
        sends, reads = [], []
        for _ in range(5):
            t0 = time.perf_counter()
            data = pickle.dumps(pack_requests(batch), protocol=5)
            sends.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            unpack_requests(pickle.loads(data))
            reads.append(time.perf_counter() - t0)
        if name == "filter":
            mtok = sum(len(r.tokens) for r in batch) / 1e6
            out.update(send_s_per_mtok=round(min(sends) / mtok, 4),
                       read_s_per_mtok=round(min(reads) / mtok, 4))
        else:
            out.update(join_send_us_per_request=round(min(sends) / len(batch) * 1e6, 3),
                       join_read_us_per_request=round(min(reads) / len(batch) * 1e6, 3))
    return out


def join_balance(workers: int = 8, anchors: int = 5000, partners: int = 4144,
                 batch: int = 65536, chunk: int = 128, own: int = 25, anchor: int = 4000) -> dict:
    """How even a join's batches are over `workers` when anchors are placed as RayEngine places
    them (sharding.place, per batch), simulated in the executor's order: pairs grouped by
    anchor, `chunk` anchors resident at a time (exec/join_runner.ANCHORS_PER_CHUNK), batches of
    `batch` pairs (the executor's cap, runner.sizer.batch_size). Work = tokens: `own` per partner
    request, `anchor` per anchor encoded. Returns sum over batches of the busiest worker's work
    over the mean worker's: the batch time relative to a perfect split."""
    from quail_engine.replicas.sharding import place

    owner: dict[int, int] = {}
    busiest = mean = 0.0
    for c in range(0, anchors, chunk):
        pairs = [a for a in range(c, min(anchors, c + chunk)) for _ in range(partners)]
        for lo in range(0, len(pairs), batch):
            load = dict.fromkeys(range(workers), 0.0)
            work: dict[int, float] = {}
            for a in pairs[lo:lo + batch]:
                if a in owner:
                    load[owner[a]] += own
                else:
                    work[a] = work.get(a, anchor) + own
            owner.update(place(work, load))
            per = dict.fromkeys(range(workers), 0.0)
            for a in pairs[lo:lo + batch]:
                per[owner[a]] += own
            for a in work:
                per[owner[a]] += anchor
            busiest += max(per.values())
            mean += sum(per.values()) / workers
    return {"workers": workers, "anchors": anchors, "partners": partners, "batch": batch,
            "busiest_over_mean": round(busiest / mean, 4)}


def configuration(args, name: str, workers: int | None, con, text, tokenizer) -> dict:
    from quail_engine.infer.factory import load_engine

    t0 = time.perf_counter()
    if workers is None:
        engine = load_engine(args.model, device=args.engine_device, precision=args.precision)
    else:
        from quail_engine.replicas.ray_engine import RayEngine

        engine = RayEngine.start(args.model, args.engine_device, args.precision, workers)
    row: dict = {"config": name, "workers": workers or 0,
                 "load_s": round(time.perf_counter() - t0, 2), "load_avg_before": load_avg()}
    try:
        for workload in args.workloads:  # warm-up: a few rows of the first set
            run_query(con, engine, text, QUERIES[workload].format(lo=0, hi=2))
        for workload in args.workloads:
            n = args.filter_docs if workload == "filter" else args.join_anchors
            runs = [run_query(con, engine, text, QUERIES[workload].format(lo=k * n,
                                                                         hi=(k + 1) * n))
                    for k in range(1, args.repeat + 1)]
            best = min(runs, key=lambda r: r["wall_s"])
            row[workload] = {k: v for k, v in best.items() if k != "answers"}
            row[workload]["answers"] = best["answers"]
            row[workload]["wall_s_all"] = [r["wall_s"] for r in runs]
        if workers:
            row.update(round_trip(engine, args.overhead_reps))
            row["worker_tokens"] = engine.worker_tokens
    finally:
        if workers:
            engine.close()
        del engine
        gc.collect()
        if args.device == "cuda":  # the plain engine's memory back to the workers' replicas
            import torch

            torch.cuda.empty_cache()
    row["load_avg_after"] = load_avg()
    return row


def summarize(rows: list[dict], workloads: list[str]) -> dict:
    plain = next((r for r in rows if r["config"] == "plain"), None)
    one = next((r for r in rows if r["workers"] == 1), None)
    out: dict = {}
    for w in workloads:
        base = plain and plain.get(w)
        for r in rows:
            if not r.get(w) or r is plain:
                continue
            if base:
                r[w]["vs_plain"] = round(base["wall_s"] / r[w]["wall_s"], 3)
                r[w]["same_rows_as_plain"] = r[w]["answers"] == base["answers"]
            if one and one.get(w) and r is not one:
                r[w]["vs_1_worker"] = round(one[w]["wall_s"] / r[w]["wall_s"], 3)
    trips = {r["workers"]: r["round_trip_s"] for r in rows if "round_trip_s" in r}
    if trips:
        out["round_trip_s"] = trips
    for r in rows:
        for w in workloads:
            if r.get(w):
                r[w].pop("answers", None)
    return out


def markdown(result: dict) -> str:
    lines = [f"# Ray backend scaling ({result['device']}, {result['model']})", "",
             f"Command: `{result['command']}`  ",
             f"Load average (uptime): before {result['load_avg_start']}, after "
             f"{result['load_avg_end']}; {result['cpus']} CPUs", "",
             "| config | workload | rows | wall s (best) | fresh tok/s | vs plain | vs 1 worker "
             "| same rows |", "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        for w in result["workloads"]:
            m = r.get(w)
            if m:
                lines.append(f"| {r['config']} | {w} | {m['rows']} | {m['wall_s']} | "
                             f"{m['tokens_per_s']} | {m.get('vs_plain', '')} | "
                             f"{m.get('vs_1_worker', '')} | {m.get('same_rows_as_plain', '')} |")
    if result.get("round_trip_s"):
        lines += ["", "Round trip of a no-op call to every worker at once (median): " + ", ".join(
            f"{n} workers {s * 1000:.2f} ms" for n, s in result["round_trip_s"].items())]
    ser = result.get("serialization")
    if ser:
        lines += [f"Moving requests to a worker (replicas/wire.py), per million prompt tokens: "
                  f"{ser['send_s_per_mtok'] * 1000:.0f} ms on the driver, "
                  f"{ser['read_s_per_mtok'] * 1000:.0f} ms on the worker; per join partner "
                  f"request of 25 tokens: {ser['join_send_us_per_request']:.2f} us on the "
                  f"driver, {ser['join_read_us_per_request']:.2f} us on the worker"]
    for b in result.get("join_balance", ()):
        lines.append(f"Join batches of {b['anchors']:,} anchors x {b['partners']:,} partners "
                     f"on {b['workers']} workers (simulated placement, {b['batch']:,}-pair "
                     f"batches): busiest worker / mean = {b['busiest_over_mean']}")
    return "\n".join(lines) + "\n"


RAY_WHEELS = ["ray==2.60.0", "msgpack==1.2.4"]  # what the GPU machine lacks of Ray's needs
CARRY_PART = 60 * 2**20  # one device call carries at most 64 MiB


def prepare_ray(target: Path) -> list[Path]:
    """The cp312 wheels of RAY_WHEELS for the GPU machine (no package index there), cut into
    folders of at most CARRY_PART bytes: carry one per device call (the machine keeps them
    while it is held), then `cat` the ray.whl.part* files back into the wheel there."""
    import subprocess

    from bench.gpu.e2e_data import PLATFORMS

    wheels = target / "wheels"
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", "-d", str(wheels)]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run(cmd + RAY_WHEELS, check=True)
    ray_wheel = next(wheels.glob("ray-*.whl"))
    data = ray_wheel.read_bytes()
    parts = []
    for k in range(0, len(data), CARRY_PART):
        part = target / f"part{k // CARRY_PART}"
        part.mkdir(parents=True, exist_ok=True)
        (part / f"{ray_wheel.name}.part{k // CARRY_PART}").write_bytes(data[k:k + CARRY_PART])
        parts.append(part)
    for other in wheels.glob("*.whl"):
        if other != ray_wheel:
            other.replace(parts[-1] / other.name)
    ray_wheel.unlink()
    wheels.rmdir()
    return parts


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--model", default=None,
                   help="default: the embedded model on the CPU, random Qwen3-4B on cuda")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--workers", default="1,2", help="Ray worker counts to run (comma list)")
    p.add_argument("--workloads", default="filter,join")
    p.add_argument("--tiny", action="store_true", help="CPU-sized corpora")
    p.add_argument("--filter-docs", type=int, default=20000)
    p.add_argument("--join-anchors", type=int, default=50)
    p.add_argument("--join-partners", type=int, default=1100)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--overhead-reps", type=int, default=50)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/quail-ray-scaling"))
    p.add_argument("--tokenizer-dir", type=Path, default=ROOT / ".carry" / "e2e" / "tok")
    p.add_argument("--out", default=None, help="result file (CPU run)")
    p.add_argument("--prepare-ray", type=Path, default=None, metavar="DIR",
                   help="only write Ray's cp312 wheels for the GPU machine into DIR, in parts "
                        "of at most 60 MiB (one per device call), and exit")
    args = p.parse_args(argv)
    args.workloads = [w for w in args.workloads.split(",") if w]
    args.worker_counts = [int(w) for w in args.workers.split(",") if w]
    args.doc_tokens, args.report_tokens = (200, 400), (3500, 4500)
    if args.tiny:
        args.filter_docs, args.join_anchors, args.join_partners = 64, 4, 12
        args.doc_tokens, args.report_tokens = (40, 80), (150, 250)
    args.engine_device = "cuda:0" if args.device == "cuda" else "cpu"
    return args


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args = parse_args(argv if argv is not None else sys.argv[1:])
    if args.prepare_ray is not None:
        for part in prepare_ray(args.prepare_ray):
            log.info("carry %s (%.1f MiB)", part, sum(
                f.stat().st_size for f in part.iterdir()) / 2**20)
        return 0
    from quail_engine.exec.prompt_text import PromptText
    from quail_engine.settings import cpu_threads

    if args.model is None:
        args.model = "default"
        if args.device == "cuda":
            from quail_testing.model_dir import write_model_dir

            write_model_dir(args.workdir / "model", args.tokenizer_dir, False, "cuda")
            args.model = str(args.workdir / "model")
    text, _ = PromptText.of_model(args.model)
    tokenizer = text.codec  # encode_batch
    con = connection(corpora(args, tokenizer))
    import ray

    from quail_engine.replicas.cluster import LOCAL_SYSTEM_CONFIG

    ray.init(num_cpus=cpu_threads(), include_dashboard=False, log_to_driver=False,
             object_store_memory=256 * 2**20, _system_config=LOCAL_SYSTEM_CONFIG)
    result: dict = {"command": " ".join(["python -m bench ray-scaling", *(argv or sys.argv[1:])]),
                    "device": args.device, "model": args.model, "cpus": cpu_threads(),
                    "workloads": args.workloads, "load_avg_start": load_avg(), "rows": [],
                    "sizes": {"filter_docs": args.filter_docs, "join_anchors": args.join_anchors,
                              "join_partners": args.join_partners},
                    "ray": ray.__version__}
    gpu = Results("ray-scaling-gpu.json") if args.device == "cuda" else None
    for name, workers in [("plain", None), *((f"ray-{n}", n) for n in args.worker_counts)]:
        if gpu is not None:
            row = gpu.section(name, configuration, args, name, workers, con, text, tokenizer)
        else:
            row = configuration(args, name, workers, con, text, tokenizer)
        if "error" not in row:
            result["rows"].append(row)
        log.info("%s done (load average %s)", name, load_avg())
    result.update(summarize(result["rows"], args.workloads))
    result["serialization"] = serialization()
    result["join_balance"] = [join_balance(workers=w) for w in (2, 4, 8)]
    result["load_avg_end"] = load_avg()
    ray.shutdown()
    if gpu is not None:
        gpu.data["summary"] = result
        gpu.save()
        print(markdown(result))
    else:
        write_result(result, "ray-scaling-cpu", markdown, args.out)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DO_NOT_TRACK", "1")
    raise SystemExit(main())
