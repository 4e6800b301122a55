"""Conformance: dbt-duckdb's own functional suite (the tests/functional of the PyPI sdist of
the pinned dbt-duckdb) passes on `type: quail` wherever it passes on plain `type: duckdb`,
checked by tests/dbt_duckdb_suite/run.py (issue 13): the whole suite on quail, then on plain
duckdb the tests quail did not pass (`--both` runs the whole suite on both). Skipped there, in
both runs, only what needs the network or a plugin that is not installed; the summary lists
them.

It takes minutes (~260 tests on quail, 2 pytest-xdist workers); leave it out locally with
`-m "not dbt_duckdb_suite"`, or run it alone with `python tests/dbt_duckdb_suite/run.py`.
"""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.dbt, pytest.mark.dbt_duckdb_suite]

RUN = Path(__file__).resolve().parents[1] / "dbt_duckdb_suite" / "run.py"


def test_quail_passes_every_test_that_plain_dbt_duckdb_passes(tmp_path):
    proc = subprocess.run([sys.executable, str(RUN), "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=2400)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-2000:]
