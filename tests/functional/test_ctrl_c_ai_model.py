"""Ctrl-C while `dbt run` computes an AI model: the AI work stops before the operator finishes, the
previous version of the table is left as it was, and dbt ends the run as cancelled (exit code
non-zero) without a Python traceback. Answers computed before the interrupt stay in the cache."""

import re
import signal
import sqlite3
import subprocess
import time

import duckdb
import pytest
from dbt_subprocess import dbt_command, dbt_env, run, write_project

pytestmark = [pytest.mark.dbt, pytest.mark.model]

# enough rows that work is left after the second batch wherever the engine's speed lands: the
# batch after the first is sized from the plan's estimate, and on a slow 2-core machine it held
# all of 240 rows (17 s), so the run ended before Ctrl-C could stop it
_ROWS = 960
_TOPICS = ("kettle", "lamp", "chair", "blender", "backpack", "tent", "radio", "heater")
_VERDICTS = ("It broke within a week and support never answered my emails.",
             "It works well, feels solid and the price was fair.")
_REVIEWS = "id,review_text\n" + "\n".join(
    f"{i},\"Review {i}: I bought the {_TOPICS[i % 8]} in spring and used it every day since. "
    f"{_VERDICTS[bool(i % 3)]} The delivery took {i % 9 + 2} days and the box was "
    f"{'fine' if i % 2 else 'dented'}.\"" for i in range(1, _ROWS + 1)) + "\n"

_MODEL = """
{{ config(materialized='table', quail_dialect='snowflake') }}
select id, {{ var('version') }} as version
from {{ ref('reviews') }}
where id <= {{ var('rows') }}
  and AI_FILTER(PROMPT('Is this review positive? {0}', review_text))
"""


def _read_until(proc: subprocess.Popen, marker: str, seen: list[str]) -> None:
    for line in proc.stdout:
        seen.append(line)
        if marker in line:
            return
    raise AssertionError(f"dbt never logged {marker!r}:\n{''.join(seen)}")


def _cached_answers(root) -> int:
    path = root / "answers" / "answers.sqlite"
    if not path.exists():
        return 0
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute("select count(*) from answers").fetchone()[0]
    finally:
        con.close()


def _table(root) -> list[tuple]:
    con = duckdb.connect(str(root / "db.duckdb"), read_only=True)
    try:
        return con.execute("select * from main.positive order by id").fetchall()
    finally:
        con.close()


def test_ctrl_c_stops_the_ai_work_and_keeps_the_previous_table(tmp_path):
    root = write_project(tmp_path, {"seeds/reviews.csv": _REVIEWS, "models/positive.sql": _MODEL},
                         dialect="snowflake")
    run(root, "seed")
    run(root, "run", "--vars", "{version: 1, rows: 4}")
    before = _table(root)
    assert before and {v for _, v in before} == {1}
    cached_before = _cached_answers(root)

    proc = subprocess.Popen(dbt_command(root, "run", "--vars", f"{{version: 2, rows: {_ROWS}}}"),
                            env=dbt_env(), cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    try:
        _read_until(proc, "running AI operators", seen)
        deadline = time.monotonic() + 600
        while _cached_answers(root) <= cached_before:  # this run's first batch is answered
            assert proc.poll() is None and time.monotonic() < deadline, "".join(seen)
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=600)
        seen.append(out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = "".join(seen)
    assert proc.returncode != 0, output
    assert "Traceback" not in output, output
    assert "positive: cancelled; its table is left as it was" in output, output
    assert not re.search(r"positive: \d+ rows", output), \
        f"the AI operator ran to the end after Ctrl-C:\n{output}"
    assert _cached_answers(root) - cached_before < _ROWS - 4, \
        "all the rows were answered after Ctrl-C"
    assert _table(root) == before
