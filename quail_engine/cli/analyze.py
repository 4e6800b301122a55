"""`quail explain` with a plan: estimated rows, tokens and seconds per operator, and with
`--analyze` the query run for real with actual rows, tokens, KV hits, seconds and SoL.

Estimates without --analyze load no weights: token counts are ~4 characters per token and
selectivities are hints or 0.5 (sampling needs the model; --analyze samples).
"""

from __future__ import annotations

import argparse
import json
import sys

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.core_runner import pair_fractions, planned_core
from quail_engine.exec.estimates import op_infos
from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.prompts import OpPrompt
from quail_engine.exec.scans import load_scan
from quail_engine.exec.session_args import add_session_args, connect, open_session, write_report
from quail_engine.plan.context import PlanContext
from quail_engine.plan.planner import plan_core

CHARS_PER_TOKEN = 4
CHAT_OVERHEAD = 8


class _TokenGuess:
    """Tokenizer stand-in for estimates: ~4 characters per token, a few chat tokens."""

    def tokenize(self, texts):
        return [[0] * max(1, len(t) // CHARS_PER_TOKEN) for t in texts]

    def chat_split(self, prefix_text, suffix_text):
        head = [0] * (CHAT_OVERHEAD // 2 + len(prefix_text) // CHARS_PER_TOKEN)
        return head, [0] * (CHAT_OVERHEAD // 2 + max(1, len(suffix_text) // CHARS_PER_TOKEN))


class _GuessRunner:
    engine = _TokenGuess()
    text = PromptText(lambda: _TokenGuess(), "token-guess")
    progress = None

    @staticmethod
    def layout(op, anchor=None):
        return OpPrompt.for_op(op, anchor)


def add_analyze_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--analyze", action="store_true",
                   help="run the query and show actual rows, tokens, KV hits and seconds")
    add_session_args(p)


def wants_plan(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "analyze", False) or getattr(args, "table", None)
                or getattr(args, "database", None))


def estimate_plans(con, parsed, model_spec, device_spec) -> list:
    """The physical plan of every core, from DuckDB scans and guessed token counts."""
    plans = []
    for core in parsed.cores:
        scans = {rel.alias: load_scan(con, rel) for rel in core.relations}
        ops = [o for o in (*core.filters, *core.joins, *core.projections)
               if all(any(f"b_{o}_{i}" in s.columns for s in scans.values())
                      for i in range(len(parsed.ai_ops[o].bindings)))]
        infos = op_infos(ops, parsed.ai_ops, scans, _GuessRunner(), AnswerStore(), 0)
        ctx = PlanContext(infos, {a: float(len(s.rows)) for a, s in scans.items()}, model_spec,
                          device_spec, pair_fraction=pair_fractions(scans),
                          columns={a: s.columns for a, s in scans.items()})
        plans.append(plan_core(planned_core(core, set(ops)), parsed.ai_ops, ctx))
    return plans


def plan_json(plans) -> list[dict]:
    return [{"logical": p.logical.text(), "remarks": list(p.remarks), "steps": [
        {"step": s.text(), "kind": s.kind, "op": s.op, "alias": s.alias, "anchor": s.anchor,
         "est_rows_in": s.rows_in, "est_rows_out": s.rows_out,
         "est_fresh_tokens": s.work.fresh_tokens, "est_seconds": s.est_seconds}
        for s in p.steps]} for p in plans]


def plan_text(plans) -> str:
    lines = []
    for n, p in enumerate(plans):
        lines.append(f"core {n}: {p.logical.text()}")
        for s in p.steps:
            lines.append(f"  {s.text():<48} rows {s.rows_in:>9.1f} -> {s.rows_out:>9.1f}  "
                         f"tokens {s.work.fresh_tokens:>10.0f}  est {s.est_seconds:.3g} s")
        lines += [f"  remark: {r}" for r in p.remarks]
    return "\n".join(lines)


def _model_spec(model: str):
    from quail_engine.infer.loader import read_config, resolve_model_dir
    from quail_engine.plan.cost import ModelSpec

    return ModelSpec.from_attrs(read_config(resolve_model_dir(model)), name=model)


def run_analyze(args: argparse.Namespace, parsed) -> int:
    """Print the plan with estimates, or (--analyze) run it and print actuals."""
    from quail_engine.exec.session_args import resolve_device
    from quail_engine.plan.device import device_spec

    con = connect(args)
    fmt = getattr(args, "fmt", "text")
    if not args.analyze:
        dev = device_spec("cuda" if resolve_device(args.device) == "cuda" else "cpu")
        plans = estimate_plans(con, parsed, _model_spec(args.model), dev)
        if fmt == "json":
            sys.stdout.write(json.dumps({"plans": plan_json(plans)}, indent=2) + "\n")
        else:
            sys.stdout.write(plan_text(plans) + "\n")
        return 0
    _, session = open_session(args, con)
    session.parse = lambda sql, dialect: parsed
    try:
        table = session.execute(parsed.source_sql, parsed.dialect)
    finally:
        write_report(session, args.report)
    if fmt == "json":
        sys.stdout.write(session.report.dumps() + "\n")
    else:
        sys.stdout.write("\n".join(session.report.plans) + "\n" + session.report.text()
                         + f"\n({table.num_rows} result rows)\n")
    return 0
