"""integration_tests/reviews built by `dbt build` exactly as CI does (a copy, the embedded model on
CPU, 4 threads): everything passes, AI models never overlap on the device, and rebuilding after
new rows arrive runs prompts only for the new rows of the incremental AI models (older rows'
answers come from the answer cache)."""

import re
import shutil
from pathlib import Path

import pytest
from dbt_subprocess import run

pytestmark = [pytest.mark.dbt, pytest.mark.model]

PROJECT = Path(__file__).resolve().parents[2] / "integration_tests" / "reviews"
_INCREMENTAL = ("sf_positive_reviews", "bq_review_scores", "dbx_sentiment")


def _ai_lines(log: str) -> list[tuple[str, str]]:
    """(model, 'start' | 'end') for each AI report line, in log order."""
    out = []
    for model, what in re.findall(r"model\.quail_reviews\.(\w+): (running AI|\d+ rows)", log):
        out.append((model, "start" if what == "running AI" else "end"))
    return out


def _prompts(log: str, model: str) -> int:
    found = re.findall(rf"model\.quail_reviews\.{model}: \d+ rows, (\d+) prompts run", log)
    assert len(found) == 1, f"no AI report line for {model}"
    return int(found[0])


def test_build_then_incremental_rebuild(tmp_path):
    root = tmp_path / "reviews"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb"))

    first = run(root, "build", "--vars", "{max_review_id: 8}").stdout
    assert "Completed successfully" in first
    lines = _ai_lines(first)
    assert lines, first
    assert all(kind == ("start" if i % 2 == 0 else "end") for i, (_, kind) in enumerate(lines))
    assert all(lines[i][0] == lines[i + 1][0] for i in range(0, len(lines), 2))

    second = run(root, "build").stdout
    assert "Completed successfully" in second
    assert _prompts(first, "bq_review_scores") == 8
    assert _prompts(second, "bq_review_scores") == 4
    assert _prompts(second, "sf_positive_reviews") == 4
    # same texts and labels as sf_sentiment (a full table), so its answers may come from there
    assert _prompts(second, "dbx_sentiment") <= 4
    assert (root / "target" / "dbx_product_names.parquet").exists()
