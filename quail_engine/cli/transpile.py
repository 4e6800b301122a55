"""`quail transpile FILE|-e SQL --read D1 --write D2`: AI-SQL from one dialect to another."""

from __future__ import annotations

import argparse
import sys

from quail_engine.sql.dialects import DIALECTS


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("transpile", help="rewrite AI-SQL from one dialect into another")
    p.add_argument("file", nargs="?", help="SQL file (or use -e)")
    p.add_argument("-e", "--execute", dest="expression", metavar="SQL", help="SQL text")
    p.add_argument("--read", "-r", required=True, choices=DIALECTS)
    p.add_argument("--write", "-w", required=True, choices=DIALECTS)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from quail_engine.sql.source_text import read_sql
    from quail_engine.sql.transpile import transpile

    out = transpile(read_sql(args.file, args.expression), args.read, args.write)
    sys.stdout.write(out.rstrip() + "\n")
    return 0
