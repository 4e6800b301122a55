"""`quail query FILE|-e SQL --dialect D --table NAME=PATH ...`: run AI-SQL on a local model."""

from __future__ import annotations

import argparse
import sys

from quail_engine.cli.session_args import (
    add_session_args,
    add_source_args,
    check_paths,
    open_args_session,
    write_report,
)
from quail_engine.exec import (
    ExecutionError,
    QuailError,
    SqlError,
    split_write,
    with_dialect_hint,
    write_rows,
)
from quail_engine.sql.source_text import read_sql


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("query", help="run a query with AI functions on a local model")
    add_source_args(p)
    p.add_argument("--output", "-o", metavar="FILE",
                   help="write the result to a .parquet, .csv or .jsonl file (replaced whole "
                        "once complete; a run stopped early leaves the previous file)")
    p.add_argument("--format", "-f", dest="fmt", default="table", choices=("table", "csv", "json"),
                   help="how to print the result when there is no --output (default: table)")
    add_session_args(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    # pyarrow: off the start of every `quail` command, which imports this module
    from quail_engine.cli.output import check_output, render, unique_names, write_file

    sql = read_sql(args.file, args.expression)
    if args.output:
        check_output(args.output)
    check_paths(args)
    try:
        write = split_write(sql, args.dialect)
    except SqlError:
        write = None  # not readable as a write: the query path says what is wrong
    if write is not None and (not args.database or args.output):
        raise QuailError(f"{write.kind} writes its rows to the DuckDB file named by --database "
                         "(and takes no --output); or run the query alone with --output FILE: "
                         f"{sql.strip()}")
    con, session = open_args_session(args)
    try:
        table = session.execute(write.query if write else sql, args.dialect)
    except (SqlError, ExecutionError) as exc:
        hinted = with_dialect_hint(exc, sql, args.dialect)
        if hinted is exc:
            raise
        raise hinted from exc
    finally:
        write_report(session, args.report)
    table = unique_names(table)
    if write is not None:
        con.close()  # the query's read-only view of the file ends before the write opens it
        rows = write_rows(args.database, write, table)
        print(f"quail: {rows} row{'s' if rows != 1 else ''} {write.verb} {write.target} in "
              f"{args.database}",
              file=sys.stderr)
    elif args.output:
        write_file(table, args.output)
    else:
        sys.stdout.write(render(table, args.fmt))
    return 0
