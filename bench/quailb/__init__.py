"""QUAIL-B's timed table, baseline, gap analysis and CLI (bench/quailb/README.md)."""

from pathlib import Path


def reports_dir(result: Path) -> Path:
    """Where a result file's per-query execution reports sit: `NAME-reports/` beside `NAME.json`."""
    return result.with_name(f"{result.stem}-reports")
