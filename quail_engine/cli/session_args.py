"""Command-line arguments shared by `quail query` and `quail explain --analyze`: the tables and
database a query reads, and the SessionConfig (model, device, precision, cache, progress) the
executor takes; the --report file."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import replace

from quail_engine.cli.progress import Progress
from quail_engine.errors import QuailError
from quail_engine.exec import SessionConfig, connect, default_cache_dir, open_session
from quail_engine.settings import DEFAULT_DIALECT, DEFAULT_PRECISION, DIALECTS, PRECISIONS


def add_source_args(p: argparse.ArgumentParser) -> None:
    """The statement to read (a file or -e SQL) and the dialect it is written in."""
    p.add_argument("file", nargs="?", help="SQL file (or use -e)")
    p.add_argument("-e", "--execute", dest="expression", metavar="SQL", help="SQL text")
    p.add_argument("--dialect", "-d", default=DEFAULT_DIALECT, choices=DIALECTS,
                   help=f"dialect the SQL is written in: {' | '.join(DIALECTS)} "
                        f"(default: {DEFAULT_DIALECT})")


def add_session_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table", "-t", action="append", default=[], metavar="NAME=PATH",
                   help="a table from a .parquet, .csv, .tsv, .json(l), .arrow or .duckdb "
                        "file (repeatable); PATH is one file, taken literally; for several "
                        "files give a pattern after glob:, e.g. 't=glob:data/*.csv'")
    p.add_argument("--database", metavar="FILE.duckdb",
                   help="make every table of this DuckDB database visible")
    p.add_argument("--model", default="default",
                   help="default | gemma3-270m | smollm2-135m | a .gguf file | a model dir")
    p.add_argument("--generation-model", default="auto", metavar="MODEL",
                   help="the model that writes generated text (AI_COMPLETE, AI.GENERATE, ...); "
                        "auto: smollm2-135m (embedded, instruction-tuned) when --model is the "
                        "default, else --model itself")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--precision", default=DEFAULT_PRECISION, choices=PRECISIONS,
                   help="auto (default): the float32 decisions wherever a re-ask band is "
                        "measured (the embedded models: bf16-band or fp32 on a CPU, bf16-band on "
                        "a GPU), else the checkpoint's own (fp8-block for a published FP8 "
                        "checkpoint on a GPU, else bf16); P-band: P with every yes/no, label "
                        "and pair decision inside P's measured band asked again in float32; "
                        "bf16, fp8, fp8-mlp, fp8-block: faster, close calls may differ from "
                        "float32 (bench/results/trust.md); fp32 (CPU only): the reference")
    p.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help="run N model replicas on Ray workers (one per GPU; on the CPU, the "
                        "cores shared out); with --ray-address, on that cluster "
                        "(docs/scale-out.md)")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="run on the Ray cluster at ADDR (host:port of its head, or auto): one "
                        "replica per GPU there unless --workers says otherwise")
    p.add_argument("--report", metavar="FILE.json", help="write the execution report here")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write cached answers")
    p.add_argument("--cache-dir", default=None, help=f"answer cache (default {default_cache_dir()})")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument("--on-long", default="truncate", choices=("truncate", "error"),
                   help="a prompt longer than the context: cut the document (keeping its "
                        "beginning and end) and count it in the report, or refuse the query")
    p.add_argument("--max-context", type=_positive_int, default=None, metavar="TOKENS",
                   help="tokens a prompt may hold (default: the model's context; 8192 for the "
                        "embedded models)")


def session_config(args: argparse.Namespace) -> SessionConfig:
    """The executor's settings from the parsed arguments."""
    return SessionConfig(model=args.model, device=args.device, precision=args.precision,
                         cache_dir=args.cache_dir, use_cache=not args.no_cache,
                         generation_model=args.generation_model,
                         on_long=args.on_long, progress=not args.quiet,
                         max_context=args.max_context,
                         workers=args.workers, ray_address=args.ray_address)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def table_specs(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(name, path) of each --table NAME=PATH, in order (a QuailError at a malformed one)."""
    for spec in args.table:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise QuailError(f"--table expects NAME=PATH, got {spec!r}")
        yield name.strip(), path.strip()


def connect_args(args: argparse.Namespace):
    """A DuckDB connection with the --table and --database inputs registered, sealed: the
    user's SQL reads those files and nothing else (exec/tables.seal)."""
    return connect(table_specs(args), args.database, sealed=True)


def open_args_session(args: argparse.Namespace, con=None):
    """(connection, QuailSession) for the parsed arguments; the model loads on first use."""
    con = con if con is not None else connect_args(args)
    return con, open_session(con, replace(session_config(args), queries_only=True),
                             display=Progress)


def check_paths(args: argparse.Namespace) -> None:
    """Refuse an unwritable --report before any work starts (a QuailError naming it)."""
    from quail_engine.cli.output import check_writable  # pyarrow: off every command's start

    if getattr(args, "report", None):
        check_writable(args.report, "--report")


def write_report(session, path: str | None) -> None:
    """The execution report as JSON at `path` (the previous file stays whole until then)."""
    if path:
        from quail_engine.cli.output import write_text  # pyarrow, as above

        write_text(path, session.report.dumps() + "\n")
