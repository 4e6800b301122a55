"""The CPU suites' result writer: `write_result` writes one finished result as JSON plus its
markdown table beside it, under bench/results/ unless `out` names a file, and prints the table.
The GPU suites and probes write JSON sections under $OUT through quail_testing/results.py (the
device checks share it). A result is named after its suite (bench/results/README.md)."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def machine() -> str:
    """The CPU's model name and core count, for results that do not name their machine."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        name = next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        name = platform.processor() or platform.machine()
    return f"{name}, {os.cpu_count()} cores"


def write_result(result: dict, prefix: str, markdown: Callable[[dict], str],
                 out: str | Path | None = None) -> Path:
    result.setdefault("machine", machine())
    path = Path(out or RESULTS / f"{prefix}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    path.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return path
