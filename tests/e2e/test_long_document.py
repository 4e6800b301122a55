"""A document far past the context, through `quail query` on the embedded default model: with
the default `--on-long truncate` it is cut to the embedded models' context (its beginning and
end kept) and answered, counted as truncated in the report; with `--on-long error` the query
is refused naming the prompt's size. Before, a 300,000-character document was cut to Gemma's
full 32,768-token context, whose one prompt ran for many minutes on a 2-core CPU."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from quail_engine.infer.embedded import EMBEDDED_CONTEXT

pytestmark = pytest.mark.model

SQL = "SELECT id FROM docs WHERE ai_filter(PROMPT('Is this review positive? {0}', body))"


@pytest.fixture(scope="module")
def long_doc(tmp_path_factory):
    rng = random.Random(3)
    words = "the kettle works well but price was high and delivery slow great service".split()
    body = " ".join(rng.choice(words) for _ in range(70_000))[:300_000]
    path = tmp_path_factory.mktemp("long") / "docs.csv"
    path.write_text(f'id,body\n1,"{body}"\n')
    return path


def _query(long_doc, tmp_path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "quail_engine", "query", "-e", SQL, "--dialect", "duckdb",
         "--table", f"docs={long_doc}", "--no-cache", "--quiet", "--format", "csv", *extra],
        capture_output=True, text=True, timeout=1800, env={**os.environ, "DO_NOT_TRACK": "1"},
        cwd=tmp_path)


def test_a_300k_character_document_is_cut_to_the_embedded_context_and_answered(long_doc,
                                                                               tmp_path):
    report = tmp_path / "report.json"
    done = _query(long_doc, tmp_path, "--report", str(report))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0].strip('"') == "id"  # a result, whatever the answer
    op = json.loads(report.read_text())["operators"][0]
    assert op["truncated"] == 1 and op["prompts"] == 1
    # the document's prompt at the context's size, plus the calibration prompt's few tokens
    assert EMBEDDED_CONTEXT // 2 < op["fresh_tokens"] <= EMBEDDED_CONTEXT + 256


def test_on_long_error_refuses_it_naming_the_size(long_doc, tmp_path):
    done = _query(long_doc, tmp_path, "--on-long", "error")
    assert done.returncode == 2, done.stderr
    assert "exceeds the context of" in done.stderr and "Traceback" not in done.stderr


def _cli(tmp_path, sql: str, dialect: str, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "r.csv").write_text("id,txt\n1,Say hi to the reader.\n")
    return subprocess.run(
        [sys.executable, "-m", "quail_engine", "query", "-e", sql, "--dialect", dialect,
         "--table", f"r={tmp_path / 'r.csv'}", "--no-cache", "--format", "csv", *extra],
        capture_output=True, text=True, timeout=600, env={**os.environ, "DO_NOT_TRACK": "1"},
        cwd=tmp_path)


@pytest.mark.parametrize("dialect,call", [
    ("snowflake", "AI_COMPLETE('m', txt, {'max_tokens': 8192})"),
    ("bigquery", "AI.GENERATE(txt, model_params => JSON "
                 "'{\"generation_config\": {\"max_output_tokens\": 8192}}').result"),
])
def test_the_vendors_largest_max_tokens_runs_within_what_the_context_leaves(tmp_path, dialect,
                                                                           call):
    """max_tokens 8192, the vendors' documented largest, with a short prompt: answered within
    the tokens the context leaves after the prompt, one warning naming the limit (it stopped
    the query once the model had loaded: 'a prompt of 8193 tokens ... shorten the input
    text'). A context of 64 tokens (--max-context) keeps the decode short on a CPU."""
    done = _cli(tmp_path, f"SELECT id, {call} AS v FROM r", dialect, "--max-context", "64")
    assert done.returncode == 0, done.stderr
    rows = done.stdout.strip().splitlines()
    assert rows[0].replace('"', "") == "id,v" and len(rows) == 2 and rows[1].split(",", 1)[1]
    warned = [line for line in done.stderr.splitlines() if "requested output tokens" in line]
    assert len(warned) == 1 and "8192 requested output tokens" in warned[0], done.stderr
    assert "context of 'smollm2-135m' (64 tokens)" in warned[0]


def test_on_long_error_names_the_prompt_when_the_prompt_alone_is_too_long(tmp_path):
    done = _cli(tmp_path, "SELECT AI_COMPLETE('m', txt || repeat(' and hi', 40), "
                          "{'max_tokens': 8192}) AS v FROM r", "snowflake",
                "--max-context", "64", "--on-long", "error")
    assert done.returncode == 2, done.stderr
    assert "exceeds the context of 64 tokens by itself" in done.stderr, done.stderr
    assert "requested output tokens" not in done.stderr and "Traceback" not in done.stderr
