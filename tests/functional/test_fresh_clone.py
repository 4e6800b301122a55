"""integration_tests/reviews on a fresh clone: its profile puts the database in target/, which does
not exist yet; dbt must create it instead of failing to connect."""

import shutil
from pathlib import Path

import pytest
from dbt_subprocess import run

pytestmark = pytest.mark.dbt

PROJECT = Path(__file__).resolve().parents[2] / "integration_tests" / "reviews"


def fresh_clone(tmp_path: Path) -> Path:
    root = tmp_path / "reviews"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb"))
    assert not (root / "target").exists()
    return root


def test_seed_creates_the_database_folder(tmp_path, monkeypatch):
    root = fresh_clone(tmp_path)
    monkeypatch.setenv("QUAIL_IT_DB", str(root / "data" / "dev" / "reviews.duckdb"))
    run(root, "seed", "--select", "reviews")
    assert (root / "data" / "dev" / "reviews.duckdb").is_file()


@pytest.mark.model
def test_debug_passes_on_a_fresh_clone(tmp_path, require_embedded):
    require_embedded("default")
    root = fresh_clone(tmp_path)
    out = run(root, "debug").stdout
    assert "All checks passed" in out
