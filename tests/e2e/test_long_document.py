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
