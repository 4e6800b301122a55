"""Every suite runs as `python -m bench <suite>` and is listed in bench/README.md: a module that
writes a suite's result (results_io.write_result) is registered in bench/__main__.SUITES, and
the README's suite table names exactly the registered suites."""

from __future__ import annotations

import re
from pathlib import Path

from bench.__main__ import SUITES

BENCH = Path(__file__).resolve().parents[1]


def _readme_suites() -> list[str]:
    text = (BENCH / "README.md").read_text()
    table = text.split("## Suites", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    return [row.split("|")[1].strip() for row in rows[1:]]  # past the header row


def test_every_module_that_writes_a_suites_result_is_registered():
    writers = {f"bench.{p.stem}" for p in BENCH.glob("*.py")
               if p.stem != "results_io" and re.search(r"\bwrite_result\(", p.read_text())}
    assert writers, "no suite module found"
    assert writers - {module for module, _, _ in SUITES.values()} == set()


def test_every_registered_module_exists_with_a_main():
    for module, _, _ in SUITES.values():
        path = BENCH.parent / (module.replace(".", "/") + ".py")
        assert re.search(r"^def main\(", path.read_text(), re.M), module


def test_the_readme_lists_every_registered_suite_once():
    listed = _readme_suites()
    assert sorted(listed) == sorted(SUITES)
