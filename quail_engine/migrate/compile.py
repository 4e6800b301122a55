"""Compile a dbt project with dbt itself, without its warehouse.

dbt runs in a subprocess (the engine never imports dbt) against a throwaway profile: a
`type: quail` target on a scratch DuckDB file, with the detected `dialect`. So Jinja, refs,
vars and the project's macros resolve as dbt resolves them; macros that need the warehouse
(`run_query` of warehouse SQL, adapter-dispatched macros with only a `snowflake__` version)
fail. A node that fails is reported as "does not compile" (the first line of dbt's error) and
left out of the next attempt; the rest compile on. Everything dbt writes goes to `scratch`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from quail_engine.errors import shorten
from quail_engine.migrate.calls import CompiledNode
from quail_engine.migrate.project import DbtProject, MigrateError

log = logging.getLogger(__name__)
stage = logging.getLogger("quail_engine.stage")
SQL_NODES = ("model", "snapshot", "test")
PROFILE, TARGET = "quail_migrate", "compile"
# "Compilation Error in model bad (models/bad.sql)" and the reason on the next line
_NODE_ERROR = re.compile(r"(\w+ Error) in (\w+) (\S+) \(([^)]*)\)\s*\n\s*(.+)")
_DBT = "from dbt.cli.main import cli; cli()"


@dataclass(frozen=True)
class CompiledProject:
    nodes: tuple[CompiledNode, ...]   # every model, snapshot and data test, compiled or not
    resource_types: dict[str, str]    # unique_id -> model | snapshot | test
    unconfigured: frozenset[str]      # unique_ids whose config sets no quail_dialect


def compile_project(project: DbtProject, dialect: str, scratch: Path) -> CompiledProject:
    """Compile every node of `project` reading its SQL as `dialect`; one MigrateError when dbt
    cannot read the project at all or no model compiles."""
    profiles_dir = scratch / "profiles"
    profiles_dir.mkdir(parents=True, exist_ok=True)
    (profiles_dir / "profiles.yml").write_text(json.dumps({PROFILE: {
        "target": TARGET, "outputs": {TARGET: {
            "type": "quail", "path": str(scratch / "compile.duckdb"), "dialect": dialect,
            "threads": 1, "cache_dir": "off"}}}}), encoding="utf-8")
    failed: dict[str, tuple[str, str]] = {}  # node name -> (kind, one-line error)
    while True:
        stage.info("compiling the dbt project %s with dbt (%d node(s) left out)", project.name,
                   len(failed))
        output, ok = _dbt_compile(project, profiles_dir, scratch, sorted(failed))
        if ok:
            break
        match = _NODE_ERROR.search(output)
        if match is None or match.group(3) in failed:
            raise MigrateError(f"dbt cannot compile the project {project.name}: "
                               f"{_first_error(output)}")
        error, kind, name, _, reason = match.groups()
        failed[name] = (kind, f"{error}: {shorten(reason, 200)}")
        if _all_models_failed(project, scratch / "target" / "manifest.json", failed):
            break  # dbt parsed the project before it failed: no model is left to compile
    return _read_manifest(project, scratch / "target" / "manifest.json", dialect, failed)


def _dbt_compile(project: DbtProject, profiles_dir: Path, scratch: Path,
                 excluded: list[str]) -> tuple[str, bool]:
    args = [sys.executable, "-c", _DBT, "compile", "--project-dir", str(project.root),
            "--profiles-dir", str(profiles_dir), "--profile", PROFILE, "--target", TARGET,
            "--target-path", str(scratch / "target"), "--log-path", str(scratch / "logs"),
            "--no-use-colors", "--log-level", "error",
            "--no-send-anonymous-usage-stats"]
    if excluded:
        args += ["--exclude", *excluded]
    env = {**os.environ, "DO_NOT_TRACK": "1", "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    done = subprocess.run(args, cwd=project.root, env=env, capture_output=True, text=True,
                          check=False)
    output = done.stdout + done.stderr
    log.debug("dbt compile exited %d: %s", done.returncode, output[-2000:])
    return output, done.returncode == 0


def _all_models_failed(project: DbtProject, path: Path, failed: dict) -> bool:
    try:
        nodes = json.loads(path.read_text(encoding="utf-8")).get("nodes", {}).values()
    except (OSError, ValueError):
        return False
    models = [n.get("name") for n in nodes if n.get("resource_type") == "model"
              and n.get("package_name") == project.name]
    return bool(models) and all(m in failed for m in models)


def _first_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if "Encountered an error" in ln), -1)
    body = [ln for ln in lines[start + 1:] if not ln.startswith("<frozen")] or lines[-1:]
    text = " ".join(body[:3]) if body else "dbt failed without saying why"
    return shorten(re.sub(r"^\d\d:\d\d:\d\d\s+", "", text), 300)


def _read_manifest(project: DbtProject, path: Path, dialect: str,
                   failed: dict[str, tuple[str, str]]) -> CompiledProject:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MigrateError(f"dbt wrote no readable manifest for {project.name}: {exc}") from None
    nodes, kinds, unconfigured = [], {}, set()
    for uid, node in manifest.get("nodes", {}).items():
        kind = node.get("resource_type")
        if (kind not in SQL_NODES or node.get("package_name") != project.name
                or node.get("language", "sql") != "sql"):
            continue
        configured = (node.get("config") or {}).get("quail_dialect")
        if not configured:
            unconfigured.add(uid)
        error = failed.get(node.get("name"), (None, None))[1]
        code = node.get("compiled_code") if error is None else None
        if code is None and error is None:
            error = "dbt did not compile it"
        nodes.append(CompiledNode(uid, node.get("original_file_path", ""),
                                  str(configured or dialect).lower(), code, error))
        kinds[uid] = kind
    models = [n for n in nodes if kinds[n.node] == "model"]
    if not models:
        raise MigrateError(f"the dbt project {project.name} has no SQL models")
    if all(n.compiled_sql is None for n in models):
        first = next(n for n in models if n.error)
        raise MigrateError(f"no model of {project.name} compiles; {first.path}: {first.error}")
    nodes.sort(key=lambda n: (SQL_NODES.index(kinds[n.node]), n.path, n.node))
    return CompiledProject(tuple(nodes), kinds, frozenset(unconfigured))
