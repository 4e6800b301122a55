"""`quail query` on the embedded model, stderr not a terminal (a log, CI): the person reading
stderr sees the stages and the AI operator's rows and tokens/s as plain lines; --quiet prints
nothing there; stdout (the result) is the same either way."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data" / "reviews.csv"
SQL = "SELECT id FROM reviews WHERE ai_filter('Is this review positive? ' || review) ORDER BY id"
OPERATOR = re.compile(r"^quail: .*\b\d[\d,]*(/\d[\d,]*)? rows? .*[\d,]+ tokens, [\d,]+ tokens/s")


def quail(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DO_NOT_TRACK": "1"}
    return subprocess.run([sys.executable, "-c", "import sys; from quail_engine.cli import "
                           "main; sys.exit(main())", *args], capture_output=True, text=True,
                          env=env, timeout=600, stdin=subprocess.DEVNULL)


def test_query_shows_stages_and_operator_lines_on_stderr_and_nothing_with_quiet(
        tmp_path, require_embedded):
    require_embedded("smollm2-135m")
    lines = EXAMPLES.read_text().splitlines()
    (tmp_path / "reviews.csv").write_text("\n".join(lines[:6]) + "\n")  # header + 5 reviews
    args = ("query", "-e", SQL, "--table", f"reviews={tmp_path / 'reviews.csv'}",
            "--device", "cpu", "--model", "smollm2-135m", "--no-cache")

    shown = quail(*args)
    assert shown.returncode == 0, shown.stderr
    err = shown.stderr.splitlines()
    assert "\r" not in shown.stderr and "\x1b" not in shown.stderr  # no bar in a log
    assert any(re.search(r"\bload", line, re.IGNORECASE) for line in err), shown.stderr
    assert any(OPERATOR.search(line) for line in err), shown.stderr

    quiet = quail(*args, "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert quiet.stdout == shown.stdout and "(" in shown.stdout and "quail:" not in shown.stdout
