"""Killing `dbt run` while an AI model is being computed leaves the previous version of its table
intact: the AI work happens before any DDL, and dbt-duckdb swaps tables inside one transaction."""

import signal
import subprocess
import time

import duckdb
import pytest
from dbt_subprocess import dbt_command, dbt_env, run, write_project

pytestmark = [pytest.mark.dbt, pytest.mark.model]

_REVIEWS = "id,review_text\n" + "\n".join(
    f"{i},Review number {i}: the kettle {'works well' if i % 2 else 'broke quickly'}."
    for i in range(1, 9)) + "\n"

_MODEL = """
{{ config(materialized='table', quail_dialect='snowflake') }}
select
    id,
    {{ var('version') }} as version,
    AI_COMPLETE('llama3.1-8b', CONCAT('Write a long story about this review: ', review_text),
                {'max_tokens': {{ var('max_tokens') }}}) as story
from {{ ref('reviews') }}
"""


def _wait_for(proc: subprocess.Popen, marker: str, timeout: float) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        if marker in line:
            return seen
    raise AssertionError(f"dbt never logged {marker!r}:\n{seen}")


def test_killed_ai_run_keeps_the_previous_table(tmp_path):
    root = write_project(tmp_path, {"seeds/reviews.csv": _REVIEWS, "models/stories.sql": _MODEL})
    run(root, "seed")
    run(root, "run", "--vars", "{version: 1, max_tokens: 2}")

    proc = subprocess.Popen(dbt_command(root, "run", "--vars", "{version: 2, max_tokens: 64}"),
                            env=dbt_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = _wait_for(proc, "running AI operators", timeout=300)
        # killed as soon as the model is loaded: the statement's generation has just begun
        # (8 stories of 64 tokens, seconds of work), no DDL has run; a fixed wait here instead
        # raced the generation, which a fast machine finishes in about as long
        seen += _wait_for(proc, "loaded model", timeout=300)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        seen += proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert "stories: 8 rows" not in seen, "the AI model finished before the kill"

    con = duckdb.connect(str(root / "db.duckdb"), read_only=True)
    try:
        versions = con.execute(
            "select version, count(*), count(story) from main.stories group by 1").fetchall()
    finally:
        con.close()
    assert versions == [(1, 8, 8)]

    run(root, "run", "--vars", "{version: 3, max_tokens: 2}")
    con = duckdb.connect(str(root / "db.duckdb"), read_only=True)
    try:
        assert con.execute("select distinct version from main.stories").fetchall() == [(3,)]
    finally:
        con.close()
