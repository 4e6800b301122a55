"""How many engine calls a grouped AI aggregate over a CSV file takes: DuckDB finalizes the
groups in one function call per thread's partition, concurrently, and exec/call_gather.py
answers the calls that overlap in one engine call. The probe runs one `AI_AGG ... GROUP BY`
through a session over a CSV of `--rows` reviews (the examples' texts, numbered) in `--groups`
groups with DuckDB at `--threads`, and counts DuckDB's calls, the engine calls they became,
and the statement's wall time; `--no-gather` answers each DuckDB call alone, as before.

    python -m bench.probes.aggregate_calls [--rows 240 --groups 12 --threads 8] [--no-gather]
        [--model default] [--device cpu] [--precision fp32] [--max-tokens 16]
        [--tokenizer DIR]

On the GPU machine `--tokenizer DIR` writes a random-weight Qwen3-4B model folder with that
tokenizer (quail_testing/model_dir.py, as `python -m bench decode` does) and asks it: random
weights measure the calls and the seconds, not the answers.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import tempfile
import time
from pathlib import Path

REVIEWS = Path(__file__).resolve().parents[2] / "examples" / "data" / "reviews.csv"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probes.aggregate_calls")
    ap.add_argument("--rows", type=int, default=240)
    ap.add_argument("--groups", type=int, default=12)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--model", default="default")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--tokenizer", type=Path, default=None,
                    help="GPU: a random Qwen3-4B folder with this tokenizer is the model")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "quail-agg")
    ap.add_argument("--no-gather", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)

    import duckdb

    if args.tokenizer is not None:
        from bench.decode import VOCAB
        from quail_testing.model_dir import write_model_dir

        model_dir = args.workdir / "model"
        write_model_dir(model_dir, args.tokenizer, tiny=False, device=args.device,
                        vocab_size=VOCAB)
        args.model = str(model_dir)
    from quail_engine.exec import call_gather
    from quail_engine.exec.facade import SessionConfig, open_session

    duckdb_calls: list[int] = []
    engine_calls: list[int] = []
    answer, ask = call_gather.GatheredCalls.answer, call_gather.GatheredCalls._answer

    def counted_answer(self, rows):
        duckdb_calls.append(len(rows))
        if args.no_gather:
            with self._lock:
                got = self._ask(list(rows))
            engine_calls.append(len(rows))
            return list(got)
        return answer(self, rows)

    def counted_ask(self, batch):
        engine_calls.append(sum(len(c.rows) for c in batch))
        return ask(self, batch)

    call_gather.GatheredCalls.answer, call_gather.GatheredCalls._answer = \
        counted_answer, counted_ask
    with open(REVIEWS, newline="") as f:
        texts = [r["review"] for r in csv.DictReader(f)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "docs.csv"
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "body", "grp"])
            w.writerows([i, f"{texts[i % len(texts)]} (#{i})", f"g{(i * 7) % args.groups}"]
                        for i in range(args.rows))
        con = duckdb.connect()
        con.execute(f"SET threads = {args.threads}")
        con.execute(f"CREATE VIEW docs AS SELECT * FROM read_csv_auto('{path}')")
        session = open_session(con, SessionConfig(
            model=args.model, device=args.device, use_cache=False, precision=args.precision,
            max_new_tokens=args.max_tokens, progress=False))
        start = time.perf_counter()
        table = session.execute("SELECT grp, AI_AGG(body, 'Name the common topic') AS t "
                                "FROM docs GROUP BY grp", "snowflake")
        wall = time.perf_counter() - start
    result = {"rows": args.rows, "groups": args.groups, "threads": args.threads,
              "gather": not args.no_gather, "device": args.device, "model": args.model,
              "precision": args.precision, "max_tokens": args.max_tokens,
              "groups_out": table.num_rows, "duckdb_calls": duckdb_calls,
              "engine_calls": engine_calls, "wall_s": round(wall, 2),
              "load_s": round(session.report.load_s, 2)}
    print(json.dumps(result))
    out = Path(args.out) / f"aggregate-calls-{'gather' if result['gather'] else 'alone'}.json"
    out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
