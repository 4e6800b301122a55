"""Where the engine waited for the host in one query: from a report's timeline (exec/timeline.py),
the time between consecutive engine batches, split into gaps at an operator call's boundary (a
call ended or began between the two batches: the next call's setup, the last batch's store)
and gaps inside one call; with the batches' own span and their GPU pass seconds beside it.

    python -m bench.probes.engine_gaps bench/results/quailb-gpu-reports/BIO-2-snowflake.json ...
"""

from __future__ import annotations

import argparse
import bisect
import json
from pathlib import Path


def engine_gaps(report: dict) -> dict:
    """-> batches, their span and GPU seconds, idle seconds before the first batch, and the
    gaps between batches: at operator-call boundaries / inside calls (seconds, counts)."""
    tl = report.get("timeline") or {}
    batches = sorted(tl.get("batches") or [], key=lambda e: e["start"])
    calls = sorted(tl.get("operators") or [], key=lambda e: e["start"])
    starts = [c["start"] for c in calls]
    ends = sorted(c["end"] for c in calls)
    at_call = inside = 0.0
    n_at = n_in = 0
    for a, b in zip(batches, batches[1:]):
        gap = b["start"] - a["end"]
        lo, hi = a["end"] - 1e-3, b["start"] + 1e-3
        boundary = (bisect.bisect_left(starts, lo) < bisect.bisect_right(starts, hi)
                    or bisect.bisect_left(ends, lo) < bisect.bisect_right(ends, hi))
        if boundary:
            at_call, n_at = at_call + gap, n_at + 1
        else:
            inside, n_in = inside + gap, n_in + 1
    # per operator: a call's start to its first batch (its setup), its last batch's end to its
    # end (the last answers' store), and the time between calls
    per_op: dict[int, dict] = {}
    previous_end = None
    for call in calls:
        own = [b for b in batches
               if b["start"] >= call["start"] - 1e-3 and b["end"] <= call["end"] + 1e-3]
        row = per_op.setdefault(call["op"], {"calls": 0, "batches": 0, "setup_s": 0.0,
                                             "tail_s": 0.0, "before_s": 0.0})
        row["calls"] += 1
        row["batches"] += len(own)
        if previous_end is not None:
            row["before_s"] += call["start"] - previous_end
        previous_end = call["end"]
        if own:
            row["setup_s"] += own[0]["start"] - call["start"]
            row["tail_s"] += call["end"] - own[-1]["end"]
    for row in per_op.values():
        for k in ("setup_s", "tail_s", "before_s"):
            row[k] = round(row[k], 3)
    return {"batches": len(batches), "calls": len(calls),
            "batch_span_s": round(sum(e["end"] - e["start"] for e in batches), 3),
            "gpu_pass_s": round(sum(e.get("gpu_pass_s", 0.0) for e in batches), 3),
            "before_first_s": round(batches[0]["start"], 3) if batches else None,
            "gaps_at_calls_s": round(at_call, 3), "gaps_at_calls": n_at,
            "gaps_inside_s": round(inside, 3), "gaps_inside": n_in,
            "per_op": {str(k): v for k, v in sorted(per_op.items())}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path, help="report JSON files (quail --report)")
    args = ap.parse_args(argv)
    for path in args.reports:
        print(path.name, json.dumps(engine_gaps(json.loads(path.read_text()))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
