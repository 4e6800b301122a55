"""Command-line arguments shared by `quail query` and `quail explain --analyze`, and the
session they open: tables, database, model, device, cache, report, progress."""

from __future__ import annotations

import argparse
from pathlib import Path

from quail_engine.errors import QuailError
from quail_engine.settings import cache_path


def default_cache_dir() -> Path:
    return cache_path("answers")


def add_session_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table", "-t", action="append", default=[], metavar="NAME=PATH",
                   help="a table from a .parquet, .csv, .tsv, .json(l), .arrow or .duckdb "
                        "file (repeatable); PATH is one file, taken literally; for several "
                        "files give a pattern after glob:, e.g. 't=glob:data/*.csv'")
    p.add_argument("--database", metavar="FILE.duckdb",
                   help="make every table of this DuckDB database visible")
    p.add_argument("--model", default="default",
                   help="default | gemma3-270m | smollm2-135m | a .gguf file | a model dir")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--precision", default="bf16", choices=("bf16", "fp8", "fp8-mlp"),
                   help="GEMM precision; fp8 and fp8-mlp run only on the GPU path and cost "
                        "accuracy on small models (docs/kernels-notes.md)")
    p.add_argument("--report", metavar="FILE.json", help="write the execution report here")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write cached answers")
    p.add_argument("--cache-dir", default=None, help=f"answer cache (default {default_cache_dir()})")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument("--on-long", default="truncate", choices=("truncate", "error"),
                   help="a document longer than the model's context: cut it (keeping its "
                        "beginning) and count it in the report, or refuse the query")


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def connect(args: argparse.Namespace):
    """A DuckDB connection with the --table and --database inputs registered."""
    import duckdb

    from quail_engine.exec.tables import attach_database, register_table

    con = duckdb.connect()
    if args.database:
        attach_database(con, args.database)
    for spec in args.table:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise QuailError(f"--table expects NAME=PATH, got {spec!r}")
        register_table(con, name.strip(), path.strip())
    return con


def open_session(args: argparse.Namespace, con=None):
    """(connection, QuailSession) for the parsed arguments; the model loads on first use."""
    from quail_engine.exec.session import QuailSession

    con = con if con is not None else connect(args)
    device = resolve_device(args.device)

    from quail_engine.exec.prompt_text import PromptText
    from quail_engine.settings import cache_path

    cache_dir = args.cache_dir or default_cache_dir()
    text, model_config = PromptText.of_model(
        args.model, tokens_dir=None if args.no_cache else cache_path("tokens"))

    def factory():
        from quail_engine.infer.factory import load_engine

        return load_engine(args.model, device="cuda:0" if device == "cuda" else device,
                           precision=args.precision, tokenizer=text.tokenizer())
    session = QuailSession(con, factory, cache_dir=cache_dir, use_cache=not args.no_cache,
                           device=device, progress=not args.quiet, on_long=args.on_long,
                           text=text, model_config=model_config, precision=args.precision)
    return con, session


def check_paths(args: argparse.Namespace) -> None:
    """Refuse an unwritable --report before any work starts (a QuailError naming it)."""
    from quail_engine.exec.output import check_writable

    if getattr(args, "report", None):
        check_writable(args.report, "--report")


def write_report(session, path: str | None) -> None:
    """The execution report as JSON at `path` (the previous file stays whole until then)."""
    if path:
        from quail_engine.exec.output import write_text

        write_text(path, session.report.dumps() + "\n")
