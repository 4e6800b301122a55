"""`quail migrate PROJECT_DIR [--from D] [--write]`: which AI calls of a dbt project move to
Quail, and (with --write) the config that runs it there. Guide: docs/migrate.md."""

from __future__ import annotations

import argparse
import sys

from quail_engine.migrate.prices import parse_credit_price, parse_prices
from quail_engine.migrate.project import WAREHOUSES


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("migrate", help="list a dbt project's AI calls and how each moves to "
                                       "Quail; --write adds the quail config")
    p.add_argument("project_dir", metavar="PROJECT_DIR", help="the dbt project's folder")
    p.add_argument("--from", dest="dialect", choices=WAREHOUSES,
                   help="the warehouse dialect of the project's SQL (default: detected from "
                        "the profile's adapter type)")
    p.add_argument("--write", action="store_true",
                   help="add +quail_dialect to dbt_project.yml and a type: quail output to "
                        "profiles.yml (a profiles.yml outside the project only with "
                        "--profiles-dir)")
    p.add_argument("--profiles-dir", metavar="DIR",
                   help="the folder of the profiles.yml to read (and, with --write, to edit)")
    p.add_argument("--data", metavar="DUCKDB_FILE",
                   help="a DuckDB file holding the project's tables: the cost estimate counts "
                        "the tokens each AI call would read on a sample of them")
    p.add_argument("--sample-rows", type=int, default=1000, metavar="N",
                   help="rows sampled per table for the token count (default 1000)")
    p.add_argument("--gpu-price", type=float, metavar="USD_PER_HOUR",
                   help="the hourly price of the GPU, for the cost beside the warehouse's")
    p.add_argument("--price", action="append", default=[], metavar="FUNCTION=IN[/OUT][UNIT]",
                   help="your warehouse price per million tokens for FUNCTION (or "
                        "FUNCTION:MODEL), in credits, USD or DBU; wins over the published "
                        "table and is labelled (given); repeatable, e.g. "
                        "--price AI_FILTER=1.2credits --price AI.IF=0.30/2.50USD")
    p.add_argument("--credit-price", metavar="USD",
                   help="the US dollar price of one credit or DBU: shows those costs in "
                        "dollars, labelled (given)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    # sqlglot: off the start of every `quail` command, which imports this module
    from quail_engine.migrate.inspect import apply, inspect_project, plan_edits
    from quail_engine.migrate.report import render

    args.user_prices = parse_prices(args.price)  # a bad value fails before dbt runs
    args.credit_usd = (None if args.credit_price is None
                       else parse_credit_price(args.credit_price))
    seen = inspect_project(args.project_dir, args.dialect, args.profiles_dir)
    plan = plan_edits(seen, args.profiles_dir) if args.write else None  # errors before output
    out = render(seen.migration) + _costs(seen.migration, args)
    if plan is not None:
        apply(plan.edits)
        out += [f"changed {e.summary}" for e in plan.edits]
        if not plan.edits and plan.left_alone is None:
            out.append("--write: nothing to change (quail_dialect is set for every model and "
                       "the profile has a type: quail output)")
        if plan.left_alone:
            out.append(plan.left_alone)
        if plan.edits or plan.left_alone is None:
            out.append(f"next: dbt build --target {plan.target} (see docs/migrate.md)")
    sys.stdout.write("\n".join(out) + "\n")
    return seen.migration.exit_status()


def _costs(migration, args: argparse.Namespace) -> list[str]:
    """The cost estimate's lines (docs/prices.md), when --data, --gpu-price, --price or
    --credit-price asks for it."""
    if (args.data is None and args.gpu_price is None and not args.user_prices
            and args.credit_usd is None):
        return []
    from quail_engine.migrate.cost import estimate, render, unmatched_prices  # sqlglot

    costs = estimate(migration.nodes, migration.calls, database=args.data,
                     sample_rows=args.sample_rows, gpu_price_per_hour=args.gpu_price,
                     user_prices=args.user_prices, credit_price=args.credit_usd)
    return (["", *render(costs)] if costs else []) + unmatched_prices(costs, args.user_prices)
