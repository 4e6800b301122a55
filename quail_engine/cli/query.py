"""`quail query FILE|-e SQL --dialect D --table NAME=PATH ...`: run AI-SQL on a local model."""

from __future__ import annotations

import argparse
import sys

from quail_engine.exec.session_args import add_session_args, open_session, write_report

DIALECTS = ("snowflake", "bigquery", "databricks", "duckdb")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("query", help="run a query with AI functions on a local model")
    p.add_argument("file", nargs="?", help="SQL file (or use -e)")
    p.add_argument("-e", "--execute", dest="expression", metavar="SQL", help="SQL text")
    p.add_argument("--dialect", "-d", default="duckdb", choices=DIALECTS)
    p.add_argument("--output", "-o", metavar="FILE", help="write the result (.parquet/.csv/.jsonl)")
    p.add_argument("--format", "-f", dest="fmt", default="table", choices=("table", "csv", "json"))
    add_session_args(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from quail_engine.exec.output import render, write_file
    from quail_engine.sql.source_text import read_sql

    sql = read_sql(args.file, args.expression)
    _, session = open_session(args)
    try:
        table = session.execute(sql, args.dialect)
    finally:
        write_report(session, args.report)
    if args.output:
        write_file(table, args.output)
    else:
        sys.stdout.write(render(table, args.fmt))
    return 0
