"""`python -m bench quailb`: QUAIL-B's 42 queries (bench/quailb/queries.py, Snowflake SQL) and
the BigQuery / Databricks twins of 14 of them (bench/quailb/twins.py) over the generated corpora
(bench/quailb/data.py), each through one `quail query` session (the exec facade), checked to run
planned (`unplanned` 0 in the report) and to return the benchmark's output columns; a twin must
return its Snowflake query's rows.

CPU mode (`--cpu`: the embedded default model, tiny scale, twins included) is the CI check
(tests/e2e/test_quailb_cpu.py). The GPU run (`--device cuda --random-model qwen3-4b --override
--scale sf0.1`, bench/quailb/README.md) records per query the time with model load excluded,
fresh / requested / minimum tokens (ledger.py), the speed of light of the minimum work on the
H200 datasheet (and on its measured sustained ceiling), `x_sol`, and a transformers baseline on a
sample of the query's prompts, extrapolated (baseline.py); then suite totals and the geometric
mean of `x_sol`. `--resume FILE` skips the queries FILE has, so the suite runs as several device
calls; `--budget-s` starts no query past that many seconds. `--device cpu --random-model tiny`
is the dry run of the GPU table on the CPU."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.quailb import data
from bench.quailb.queries import ORDER, QUERIES
from bench.quailb.twins import TWINS

ROOT = Path(__file__).resolve().parents[2]
# query id -> why it does not run planned yet (measured; bench/quailb/README.md). Empty since
# the executor runs a CTE's classification core before the core whose scan reads it.
KNOWN_GAPS: dict[str, str] = {}


def _digest(table: Any) -> str:
    """Order-free hash of a result (the benchmark's queries have no ORDER BY): the sum, modulo
    2**64, of DuckDB's hash of each row's values as text (so an INTEGER and a BIGINT 1 agree, as a
    twin's may). QUAIL-B IMDB-9 returns 49.5 M rows: sorting them as JSON lines in Python took
    ~250 s of a GPU call (session 10), this takes seconds."""
    import duckdb

    if table.num_rows == 0:
        return hashlib.blake2b(b"", digest_size=8).hexdigest()
    table = table.rename_columns([f"c{i}" for i in range(table.num_columns)])
    values = ", ".join(f"c{i}::VARCHAR" for i in range(table.num_columns))
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.register("result", table)
    (total,) = con.execute(f"SELECT sum(hash({values})::HUGEINT) % 18446744073709551616 "
                           "FROM result").fetchone()
    con.close()
    return f"{int(total):016x}"


@dataclass
class Suite:
    """Sessions over one generated corpus and one engine (loaded once, shared by every
    query). Each query gets its own empty answer cache, so an operator DuckDB answers row by row
    shows as `unplanned` instead of hiding behind an earlier query's cached answers."""
    open: Any    # answer cache dir -> a session
    work: Path
    engine: list  # the engine once loaded (the override's stats live on it)
    load: Any = None  # loads the engine now, returns it
    last_report: dict | None = None  # the execution report of the last query run, as JSON

    def run(self, query: Any) -> dict:
        """`query`: a queries.Query (Snowflake) or a twins.Twin (its dialect and Snowflake id)."""
        dialect = getattr(query, "dialect", "snowflake")
        name = getattr(query, "name", query.id)
        ledger = self.engine[0] if self.engine and hasattr(self.engine[0], "start") else None
        if ledger is not None:
            ledger.start()
        # each query on its own: no KV content-shared from an earlier query (a benchmark query
        # is timed alone, and a twin must be computed as its Snowflake query was)
        cache = getattr(self.engine[0], "prefix_cache", None) if self.engine else None
        if cache is not None:
            cache.index.clear()
        self.session = self.open(self.work / "answers" / name.replace("@", "-"))
        bench0 = bench_seconds(self.engine[0] if self.engine else None)
        t0 = time.perf_counter()
        expected = list(QUERIES[query.id].columns)
        row: dict[str, Any] = {"id": query.id, "dialect": dialect, "expected_columns": expected}
        try:
            table = self.session.execute(query.sql, dialect)
        except Exception as exc:  # noqa: BLE001 - recorded per query, the suite goes on
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}".splitlines()[0],
                       wall_s=round(time.perf_counter() - t0, 3))
            return row
        report = self.session.report
        self.last_report = report.to_json()
        unplanned = {f"#{o.op} {o.kind}": o.unplanned for o in report.ops.values()
                     if o.unplanned}
        wall_s = time.perf_counter() - t0  # the query's: the digest below is the bench's
        row.update(
            columns=table.column_names, rows=table.num_rows, digest=_digest(table),
            unplanned=unplanned, fresh_tokens=report.fresh_tokens,
            requested_tokens=sum(o.requested_tokens for o in report.ops.values()),
            wall_s=round(wall_s, 3), load_s=round(report.load_s, 3),
            wait_s=round(report.phases.get("device_wait", 0.0), 3),
            op_min_tokens=getattr(report, "minimum_tokens", None),  # per operator, summed
            sol_work_s=report.sol_seconds)
        # the bench's own wrappers (override draws, ledger) ran on the engine's thread
        row["bench_s"] = round(bench_seconds(self.engine[0]) - bench0, 3)
        # the query's own time: not the model's load, not another process's turn on the device,
        # not the bench's bookkeeping
        row["run_s"] = round(row["wall_s"] - row["load_s"] - row["wait_s"] - row["bench_s"], 3)
        row["ok"] = not unplanned and table.column_names == expected
        if not row["ok"]:
            row["error"] = (f"unplanned operators {unplanned}" if unplanned else
                            f"columns {table.column_names} != {expected}")
        return row


def bench_seconds(engine: Any) -> float:
    """Seconds the bench's engine wrappers (override.py, ledger.py) spent in their own code, down
    the chain of wrapped engines."""
    total = 0.0
    while engine is not None:
        total += vars(engine).get("bench_s", 0.0) if hasattr(engine, "__dict__") else 0.0
        engine = vars(engine).get("_engine") if hasattr(engine, "__dict__") else None
    return total


def open_suite(work_dir: str | Path, scale: str = "tiny", *, model: str = "default",
               device: str = "cpu", override: bool = False, seed: int = 0,
               precision: str | None = None, ledger: bool = False,
               tables: Iterable[str] | None = None,
               sample: Mapping[str, int] | None = None) -> Suite:
    """Generate the corpora under work_dir and register them; sessions on them keep their
    answer caches under work_dir (the override's answers must not reach a user's cache).
    `ledger`: wrap the engine in ledger.TokenLedger (minimum tokens, baseline sample);
    `tables`, `sample`: only those tables, the first rows of some (data.tables)."""
    from quail_engine.exec import SessionConfig, connect, load_engine, model_text

    work = Path(work_dir)
    sampled = "".join(f"-{t}{n}" for t, n in sorted((sample or {}).items()))
    paths = data.generate(work / f"data-{scale}{sampled}", scale, tables, sample)
    con = connect((name, str(path)) for name, path in paths.items())
    extra = {"precision": precision} if precision else {}
    config = SessionConfig(model=model, device=device, cache_dir=work / "answers", **extra)
    text = model_text(config)
    loaded: list = []

    def engine() -> Any:
        if not loaded:
            inner = load_engine(config, text[0])
            if override:
                from bench.quailb.override import SelectivityOverride
                inner = SelectivityOverride(inner, seed=seed)
            if ledger:
                from bench.quailb.ledger import TokenLedger
                inner = TokenLedger(inner, seed=seed)
            loaded.append(inner)
        return loaded[0]

    def session(cache_dir: Path) -> Any:
        from quail_engine.exec import open_session

        cfg = dataclasses.replace(config, cache_dir=cache_dir)
        return open_session(con, cfg, text=text, engine_factory=engine)

    return Suite(session, work, loaded, engine)


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
