"""What an AI model's run tells dbt: its `adapter_response` (run_results.json) and result line.

The executor's report (exec/report.py, `Report.to_json()`) becomes a `QuailAdapterResponse`:
dbt-duckdb's response ("OK") plus the AI work, the way dbt-bigquery adds bytes processed. Its
message is what dbt prints in the model's result line (`[OK: 8 rows, 3 prompts run, ... in
4.1s]`). Plain SQL models keep dbt-duckdb's response unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dbt.adapters.contracts.connection import AdapterResponse


@dataclass
class QuailAdapterResponse(AdapterResponse):
    """dbt-duckdb's response plus an AI model's work. `rows_affected`: the rows the AI
    statement produced (an incremental model: the new rows)."""

    prompts: int | None = None           # AI calls asked, answered from cache or run
    prompts_run: int | None = None       # ... run on the model this time
    cache_hits: int | None = None        # ... answered from the answer cache
    fresh_tokens: int | None = None      # tokens the model read (shared prefixes once)
    requested_tokens: int | None = None  # tokens the prompts hold in all
    seconds: float | None = None         # the AI statement's wall time, model load included
    load_seconds: float | None = None    # loading the model (0 when already loaded)
    sol_seconds: float | None = None     # speed of light of that work on the device's peak
    device: str | None = None
    ai_model: str | None = None          # the model that answered ("" when all were cached)
    plan: str | None = None              # the executor's plan text, one block per core


def work_fields(report: dict[str, Any], rows: int) -> dict[str, Any]:
    """The AI work of one statement from its report's JSON (`Report.to_json()`)."""
    prompts = sum(int(o.get("prompts", 0)) for o in report.get("operators", []))
    hits = int(report.get("cache_hits", 0))
    return {
        "rows_affected": rows, "prompts": prompts, "prompts_run": prompts - hits,
        "cache_hits": hits, "fresh_tokens": int(report.get("fresh_tokens", 0)),
        "requested_tokens": int(report.get("requested_tokens", 0)),
        "seconds": round(float(report.get("wall_s", 0.0)), 4),
        "load_seconds": round(float(report.get("load_s", 0.0)), 4),
        "sol_seconds": float(report.get("sol_seconds", 0.0)),
        "device": str(report.get("device") or ""), "ai_model": str(report.get("model") or ""),
        "plan": "\n\n".join(report.get("plans") or []),
    }


def summary(work: dict[str, Any]) -> str:
    """One line of an AI model's work: `8 rows, 3 prompts run, 5 from cache, 912 tokens,
    AI 2.31 s (speed of light 0.0021 s)`."""
    return (f"{work['rows_affected']} rows, {work['prompts_run']} prompts run, "
            f"{work['cache_hits']} from cache, {work['fresh_tokens']} tokens, "
            f"AI {work['seconds']:.2f} s (speed of light {work['sol_seconds']:.2g} s)")


def ai_response(response: AdapterResponse, work: dict[str, Any]) -> QuailAdapterResponse:
    """`response` (a statement's, from dbt-duckdb) with the model's AI `work` added."""
    return QuailAdapterResponse(
        _message=f"{response._message}: {summary(work)}", code=response.code,
        query_id=response.query_id, **work)
