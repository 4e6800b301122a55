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
weights from .carry/e2e as bench/e2e_gpu.py makes them; Ray must be importable there):
    python bench/ray_scaling.py --device cuda --workers 1,2 --filter-docs 20000 \
        --join-anchors 50 --join-partners 1100
The CPU run writes bench/results/cpu-ray-scaling-<date>.json/.md with `uptime`'s load average;
the GPU run writes ray_scaling.json under $OUT (bench/results_io.Results).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.results_io import Results, write_result  # noqa: E402

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

    session = QuailSession(con.cursor(), lambda: engine, cache_dir=None, text=text)
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
    return "\n".join(lines) + "\n"


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
    from quail_engine.exec.prompt_text import PromptText
    from quail_engine.settings import cpu_threads

    if args.model is None:
        args.model = "default"
        if args.device == "cuda":
            from bench.gpu.e2e_data import write_model_dir

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
    gpu = Results("ray_scaling.json") if args.device == "cuda" else None
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
    result["load_avg_end"] = load_avg()
    ray.shutdown()
    if gpu is not None:
        gpu.data["summary"] = result
        gpu.save()
        print(markdown(result))
    else:
        write_result(result, "cpu-ray-scaling", markdown, args.out)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DO_NOT_TRACK", "1")
    raise SystemExit(main())
