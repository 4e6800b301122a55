"""The one result writer of the benches.

`Results`: a JSON file of named sections under $OUT (the device machine's output folder) or
bench/results/local, rewritten after each section so a killed run keeps what it measured (the
GPU suites and probes). `write_result`: one finished result as JSON plus its markdown table
beside it, under bench/results/ unless `out` names a file (the CPU suites); the table is
printed too. Committed results are renamed to the suite's file in bench/results/README.md."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
log = logging.getLogger("bench")


def out_dir() -> Path:
    path = Path(os.environ.get("OUT") or RESULTS / "local")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Results:
    """Sections of a JSON results file, rewritten after each section so a killed run keeps
    what it measured."""

    def __init__(self, name: str):
        self.path = out_dir() / name
        self.data: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def section(self, key: str, fn, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:  # report and go on: one broken section must not lose the rest
            value = {"error": f"{type(exc).__name__}: {exc}",
                     "trace": traceback.format_exc()[-3000:]}
            log.error("section %s failed: %s", key, value["error"])
        self.data[key] = value
        self.data[key + "_seconds"] = round(time.perf_counter() - t0, 2)
        self.save()
        log.info("section %s done in %.1fs", key, self.data[key + "_seconds"])
        return value

    def save(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=1, default=str))


def write_result(result: dict, prefix: str, markdown: Callable[[dict], str],
                 out: str | Path | None = None) -> Path:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    path = Path(out or RESULTS / f"{prefix}-{stamp}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    path.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return path
