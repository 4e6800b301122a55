"""`quail transpile FILE|-e SQL --read D1 --write D2`: AI-SQL from one dialect to another."""

from __future__ import annotations

import argparse
import sys

from quail_engine.errors import SqlError
from quail_engine.settings import DIALECTS
from quail_engine.sql.dialect_guess import dialect_hint, with_dialect_hint
from quail_engine.sql.source_text import read_sql


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("transpile", help="rewrite AI-SQL from one dialect into another")
    p.add_argument("file", nargs="?", help="SQL file (or use -e)")
    p.add_argument("-e", "--execute", dest="expression", metavar="SQL", help="SQL text")
    p.add_argument("--read", "-r", required=True, choices=DIALECTS,
                   help=f"dialect the SQL is written in: {' | '.join(DIALECTS)}")
    p.add_argument("--write", "-w", required=True, choices=DIALECTS,
                   help=f"dialect to write: {' | '.join(DIALECTS)}")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    # sqlglot: off the start of every `quail` command, which imports this module
    from quail_engine.sql.query import parse
    from quail_engine.sql.transpiler import transpile

    sql = read_sql(args.file, args.expression)
    advice = "use --read {name}"
    try:
        out = transpile(sql, args.read, args.write)
    except SqlError as exc:
        hinted = with_dialect_hint(exc, sql, args.read, advice)
        if hinted is exc:
            raise
        raise hinted from exc
    if not parse(sql, args.read, runnable=False).ai_ops:
        hint = dialect_hint(sql, args.read, advice)
        if hint:
            sys.stderr.write(f"quail transpile: no AI functions read as {args.read} SQL; "
                             f"{hint}\n")
    sys.stdout.write(out.rstrip() + "\n")
    return 0
