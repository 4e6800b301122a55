"""`quail explain` with a plan: estimated rows, tokens and seconds per operator, and with
`--analyze` the query run for real with actual rows, tokens, KV hits, seconds and SoL.

Estimates without --analyze load no weights (exec/analyze.py says how they are guessed).
"""

from __future__ import annotations

import argparse
import json
import sys

from quail_engine.cli.session_args import (
    add_session_args,
    connect_args,
    open_args_session,
    session_config,
    write_report,
)


def add_analyze_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--analyze", action="store_true",
                   help="run the query and show actual rows, tokens, KV hits and seconds")
    p.add_argument("--plot", metavar="FILE.html|FILE.png",
                   help="with --analyze: draw the run's timeline (operators, engine passes, "
                        "tokens/s, KV arena, cache hits) into this file; PNG needs "
                        "pip install 'dbt-quail[plot]'")
    add_session_args(p)


def wants_plan(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "analyze", False) or getattr(args, "table", None)
                or getattr(args, "database", None))


def plan_json(plans) -> list[dict]:
    return [{"logical": p.logical.text(), "remarks": [*p.hint_remarks, *p.remarks], "steps": [
        {"step": s.text(), "kind": s.kind, "op": s.op, "alias": s.alias, "anchor": s.anchor,
         "est_rows_in": s.rows_in, "est_rows_out": s.rows_out,
         "est_fresh_tokens": s.work.fresh_tokens, "est_seconds": s.est_seconds}
        for s in p.steps], "strategy": p.strategy_lines()} for p in plans]


def plan_text(plans) -> str:
    lines = []
    for n, p in enumerate(plans):
        lines.append(f"core {n}: {p.logical.text()}")
        for s in p.steps:
            lines.append(f"  {s.text():<48} rows {s.rows_in:>9.1f} -> {s.rows_out:>9.1f}  "
                         f"tokens {s.work.fresh_tokens:>10.0f}  est {s.est_seconds:.3g} s")
        lines += [f"  {line}" for line in p.strategy_lines()]
        lines += [f"  remark: {r}" for r in (*p.hint_remarks, *p.remarks)]
    return "\n".join(lines)


def run_analyze(args: argparse.Namespace, parsed) -> int:
    """Print the plan with estimates, or (--analyze) run the query and print actuals."""
    # the planner, pyarrow, numpy: off the start of every `quail` command (it imports this module)
    from quail_engine.exec.facade import estimated_plans

    con = connect_args(args)
    fmt = getattr(args, "fmt", "text")
    if not args.analyze:
        plans = estimated_plans(con, parsed, session_config(args))
        if fmt == "json":
            sys.stdout.write(json.dumps({"plans": plan_json(plans)}, indent=2) + "\n")
        elif plans:
            sys.stdout.write(plan_text(plans) + "\n")
        else:  # nothing for the planner (no AI call, or each unplanned): the statement as run
            from quail_engine.sql.explain import explain_text

            sys.stdout.write(explain_text(parsed) + "\n")
        return 0
    _, session = open_args_session(args, con)
    try:
        table = session.execute(parsed.source_sql, parsed.dialect)
    finally:
        write_report(session, args.report)
    if getattr(args, "plot", None):
        from quail_engine.cli.plot import write_plot  # pyarrow, as above

        write_plot(session.report.to_json(), args.plot)
    if fmt == "json":
        sys.stdout.write(session.report.dumps() + "\n")
    else:
        sys.stdout.write("\n".join(session.report.plans) + "\n" + session.report.text()
                         + f"\n({table.num_rows} result rows)\n")
    return 0
