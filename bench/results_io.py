"""The CPU suites' result writer: `write_result` writes one finished result as JSON plus its
markdown table beside it, under bench/results/ unless `out` names a file, and prints the table.
The GPU suites and probes write JSON sections under $OUT through quail_testing/results.py (the
device checks share it). A committed result takes its suite's file name in
bench/results/README.md."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def write_result(result: dict, prefix: str, markdown: Callable[[dict], str],
                 out: str | Path | None = None) -> Path:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    path = Path(out or RESULTS / f"{prefix}-{stamp}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    path.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return path
