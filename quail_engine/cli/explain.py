"""`quail explain FILE|-e SQL --dialect D [--format text|json] [--table N=PATH ...] [--analyze]`:
the logical plan; with tables, the costed physical plan; with --analyze, actuals from a real run."""

from __future__ import annotations

import argparse
import json
import sys

from quail_engine.cli.analyze import add_analyze_args, run_analyze, wants_plan
from quail_engine.cli.session_args import add_source_args, check_paths
from quail_engine.errors import ExecutionError, SqlError
from quail_engine.sql.dialect_guess import dialect_hint, with_dialect_hint
from quail_engine.sql.source_text import read_sql


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("explain", help="show the AI operators, cores and DuckDB SQL of a query")
    add_source_args(p)
    p.add_argument("--format", "-f", dest="fmt", default="text", choices=("text", "json"),
                   help="text, or json for tools (default: text)")
    add_analyze_args(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    # pyarrow and sqlglot: off the start of every `quail` command, which imports this module
    from quail_engine.cli.plot import check_plot
    from quail_engine.sql.explain import explain_json, explain_text
    from quail_engine.sql.query import parse

    sql = read_sql(args.file, args.expression)
    check_paths(args)
    check_plot(args)
    try:
        parsed = parse(sql, args.dialect)
        if wants_plan(args):
            return run_analyze(args, parsed)
    except (SqlError, ExecutionError) as exc:
        hinted = with_dialect_hint(exc, sql, args.dialect)
        if hinted is exc:
            raise
        raise hinted from exc
    if not parsed.ai_ops:
        hint = dialect_hint(sql, args.dialect)
        if hint:
            sys.stderr.write(f"quail explain: no AI functions read as {args.dialect} SQL; "
                             f"{hint}\n")
    if args.fmt == "json":
        sys.stdout.write(json.dumps(explain_json(parsed), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(explain_text(parsed) + "\n")
    return 0
