"""The plan's estimate of an AI_SIMILARITY counts the content-free references its PMI reads
(OpSpec.num_references) besides the two directions: on the 40 reviews of examples/data, ranked
against one sentence or paired with 40 other texts, the estimated fresh tokens lie within
-15% / +25% of the tokens the model ran (without the references they fell 23% and 37% short)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from quail_engine.cli import main

pytestmark = pytest.mark.model
REVIEWS = Path(__file__).resolve().parents[2] / "examples" / "data" / "reviews.csv"
LOW, HIGH = 0.85, 1.25  # estimated / fresh tokens


def _estimate_and_fresh(tmp_path, sql: str, table: Path) -> tuple[float, int]:
    report = tmp_path / "report.json"
    assert main(["query", "-e", sql, "--dialect", "snowflake", "--table", f"t={table}",
                 "--precision", "fp32", "--no-cache", "-q", "--output",
                 str(tmp_path / "out.csv"), "--report", str(report)]) == 0
    [op] = json.loads(report.read_text())["operators"]
    assert op["kind"] == "ai_similarity" and op["rows_in"] == 40
    return op["est_tokens"], op["fresh_tokens"]


def _pairs(tmp_path) -> Path:
    """Each review beside another, reworded so no text appears in both columns: every second
    text is distinct, so each row's two directions read two references."""
    with REVIEWS.open() as f:
        texts = [r["review"] for r in csv.DictReader(f)]
    path = tmp_path / "pairs.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "a", "b"])
        for i, text in enumerate(texts):
            w.writerow([i, text, "Another customer wrote: " + texts[(i + 1) % len(texts)].lower()])
    return path


def test_ranked_against_one_sentence(tmp_path):
    est, fresh = _estimate_and_fresh(
        tmp_path, "SELECT id, AI_SIMILARITY(review, 'The shoes are comfortable and well made.') "
                  "AS s FROM t", REVIEWS)
    assert LOW <= est / fresh <= HIGH, (est, fresh)


def test_two_columns_of_distinct_texts(tmp_path):
    est, fresh = _estimate_and_fresh(tmp_path, "SELECT id, AI_SIMILARITY(a, b) AS s FROM t",
                                     _pairs(tmp_path))
    assert LOW <= est / fresh <= HIGH, (est, fresh)
