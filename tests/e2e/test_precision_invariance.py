"""The answers `--precision auto` gives are float32's on every CPU: the README's main query and a
two-table question return the same rows under auto, the banded bf16 and fp32 (on a CPU without
bf16 dot products every one of them computes in float32, so this holds trivially there)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from quail_engine.cli import main

pytestmark = pytest.mark.model
ROOT = Path(__file__).resolve().parents[2]
README_QUERY = ["query", str(ROOT / "examples" / "snowflake" / "reviews.sql"), "--dialect",
                "snowflake", "--table", f"reviews={ROOT / 'examples' / 'data' / 'reviews.csv'}",
                "--no-cache", "-q"]


def _rows(tmp_path, args, precision):
    out, report = tmp_path / f"{precision}.csv", tmp_path / f"{precision}.json"
    assert main([*args, "--precision", precision, "--output", str(out),
                 "--report", str(report)]) == 0
    with out.open() as f:
        return list(csv.reader(f)), json.loads(report.read_text())


def test_the_readme_query_returns_float32_answers_under_auto(tmp_path):
    reference, _ = _rows(tmp_path, README_QUERY, "fp32")
    auto, report = _rows(tmp_path, README_QUERY, "auto")
    assert auto == reference and len(reference) > 1
    banded, report = _rows(tmp_path, README_QUERY, "bf16-band")
    assert banded == reference
    assert report["device"].endswith("+float32-band")


def test_a_join_under_the_band_is_float32s(tmp_path, data_dir):
    sql = ("SELECT r.id, p.name FROM reviews r JOIN products p ON AI_FILTER(PROMPT('Is the "
           "review {0} about the product {1}?', r.review, p.name)) ORDER BY 1, 2")
    args = ["query", "-e", sql, "--dialect", "snowflake", "--table",
            f"reviews={data_dir / 'reviews.csv'}", "--table",
            f"products={data_dir / 'products.csv'}", "--no-cache", "-q"]
    reference, _ = _rows(tmp_path, args, "fp32")
    banded, _ = _rows(tmp_path, args, "bf16-band")
    assert banded == reference
