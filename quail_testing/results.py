"""Sections of a JSON results file, written under $OUT (the device machine's output folder) or
bench/results/local (git-ignored) when it is unset: the device checks (tests/device/) and the
bench's GPU suites and probes write through it. Each section is saved as it ends, so a run
killed at its time limit keeps what it measured."""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
from pathlib import Path

LOCAL = Path(__file__).resolve().parents[1] / "bench" / "results" / "local"
log = logging.getLogger("quail_testing.results")


def out_dir() -> Path:
    path = Path(os.environ.get("OUT") or LOCAL)
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
