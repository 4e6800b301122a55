"""`quail explain FILE|-e SQL --dialect D [--format text|json] [--table N=PATH ...] [--analyze]`:
the logical plan; with tables, the costed physical plan; with --analyze, actuals from a real run."""

from __future__ import annotations

import argparse
import json
import sys

from quail_engine.sql.dialects import DIALECTS


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("explain", help="show the AI operators, cores and DuckDB SQL of a query")
    p.add_argument("file", nargs="?", help="SQL file (or use -e)")
    p.add_argument("-e", "--execute", dest="expression", metavar="SQL", help="SQL text")
    p.add_argument("--dialect", "-d", default="duckdb", choices=DIALECTS)
    p.add_argument("--format", "-f", dest="fmt", default="text", choices=("text", "json"))
    from quail_engine.exec.analyze import add_analyze_args

    add_analyze_args(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from quail_engine.sql.explain import explain_json, explain_text
    from quail_engine.sql.query import parse
    from quail_engine.sql.source_text import read_sql

    parsed = parse(read_sql(args.file, args.expression), args.dialect)
    from quail_engine.exec.analyze import run_analyze, wants_plan

    if wants_plan(args):
        return run_analyze(args, parsed)
    if args.fmt == "json":
        sys.stdout.write(json.dumps(explain_json(parsed), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(explain_text(parsed) + "\n")
    return 0
