"""`quail` command line: query | explain | transpile | migrate | warmup.

Each subcommand lives in its own module exposing `add_parser(subparsers)` and `run(args) -> int`.
User errors (QuailError) print their message on one line and exit 2; an unexpected exception
prints one "internal error" line and exits 3 (the traceback only with -v); never a bare
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback

from quail_engine.cli.stages import show_stages
from quail_engine.errors import QuailError, shorten

COMMANDS = ("query", "explain", "transpile", "migrate", "warmup")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quail", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"quail_engine.cli.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    show_stages(bool(getattr(args, "quiet", False)))
    try:
        return int(args.run(args) or 0)
    except QuailError as exc:
        print(f"quail {args.command}: error: {shorten(exc, 1000)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"quail {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `quail ... | head`: the reader left; say nothing more
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stays open until exit
        return 141
    except Exception as exc:  # last resort: a bug of ours, never a bare traceback
        if args.verbose:
            traceback.print_exc()
        print(f"quail {args.command}: internal error: {type(exc).__name__}: {shorten(exc)} "
              "(a bug in quail: please report it with the command that caused it"
              f"{'' if args.verbose else '; -v shows the traceback'})", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
