"""A throwaway dbt project on disk driven through the `dbt` command in a child process, for tests
that must kill dbt or read its real console output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

DBT = shutil.which("dbt", path=str(Path(sys.executable).parent)) or "dbt"


def write_project(root: Path, files: dict[str, str], dialect: str = "duckdb",
                  threads: int = 1) -> Path:
    """Write dbt_project.yml, profiles.yml (type: quail on root/db.duckdb) and `files`."""
    project = {"name": "quail_test", "version": "1.0", "config-version": 2,
               "profile": "quail_test", "flags": {"send_anonymous_usage_stats": False}}
    profile = {"quail_test": {"target": "dev", "outputs": {"dev": {
        "type": "quail", "path": str(root / "db.duckdb"), "threads": threads,
        "device": "cpu", "dialect": dialect, "cache_dir": str(root / "answers")}}}}
    (root / "dbt_project.yml").write_text(yaml.safe_dump(project))
    (root / "profiles.yml").write_text(yaml.safe_dump(profile))
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def dbt_command(root: Path, *args: str) -> list[str]:
    return [DBT, *args, "--project-dir", str(root), "--profiles-dir", str(root)]


def dbt_env() -> dict[str, str]:
    return {**os.environ, "DO_NOT_TRACK": "1", "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}


def run(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(dbt_command(root, *args), env=dbt_env(), cwd=root, capture_output=True,
                          text=True, timeout=900)
    if check and done.returncode != 0:
        raise AssertionError(f"dbt {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done
