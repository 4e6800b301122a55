"""pytest plugin loaded into dbt-duckdb's own functional suite by run.py beside it.

QUAIL_SUITE_ADAPTER=quail rewrites every `type: duckdb` output of the profiles.yml each test
writes (its conftest's target and the whole profiles some tests build themselves) to
`type: quail`; =duckdb leaves them alone, so both runs share this plugin and its skip list.
QUAIL_SUITE_RESULTS names a JSON file that receives each test's outcome and the adapter type
its project ran on (`{"tests": {nodeid: {"outcome": ..., "adapter": ...}}, "not_collected":
{path: reason}}`).

Skipped, in both runs, with the reason: only tests that need the network (dbt package hub,
GitHub, DuckDB extension downloads) or a plugin that is not installed.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import types
from pathlib import Path

import pytest

ADAPTER = os.environ.get("QUAIL_SUITE_ADAPTER", "duckdb")

# Module or node id prefix -> why it cannot run without the network.
NETWORK_SKIPS = {
    "tests/functional/adapter/test_community_extensions.py":
        "installs DuckDB community extensions from the network",
    "tests/functional/adapter/utils/test_date_spine.py":
        "runs `dbt deps`: downloads dbt_utils from the dbt package hub",
    "tests/functional/fsspec/test_filesystems.py": "reads a GitHub repository through fsspec",
}

# Module prefix -> (Python module the test needs, what for); skipped when it is missing.
PLUGIN_SKIPS = {
    "tests/functional/plugins/test_plugins.py": ("sqlalchemy", "the sqlalchemy source plugin"),
    "tests/functional/plugins/test_gsheet.py": ("gspread", "the gsheet plugin"),
    "tests/functional/plugins/test_glue.py": ("boto3", "the glue plugin"),
    "tests/functional/plugins/test_iceberg.py": ("pyiceberg", "the iceberg plugin"),
}

# Modules that cannot even be imported without a plugin: left out of collection.
IMPORT_NEEDS = {
    "tests/functional/plugins/test_delta.py": ("deltalake", "the delta plugin"),
    "tests/functional/plugins/test_postgres.py":
        ("testcontainers", "a PostgreSQL container (testcontainers, Docker)"),
}

# DuckDB extension -> modules that install it at run time (skipped unless already installed).
EXTENSION_SKIPS = {
    "sqlite_scanner": ("tests/functional/plugins/test_sqlite.py",),
}

_results: dict[str, dict[str, str]] = {}


@functools.cache
def _has_module(name: str) -> bool:
    """Whether `name` is really installed (the boto3 stub below does not count)."""
    return importlib.util.find_spec(name) is not None


def _stub_boto3() -> None:
    """test_external.py imports boto3 at module level only to clean up after its S3 tests,
    which skip themselves without S3 credentials; a stub lets its module be collected."""
    if not _has_module("boto3"):  # cached before the stub exists
        sys.modules["boto3"] = types.ModuleType("boto3")


def _extension_installed(name: str) -> bool:
    import duckdb

    rows = duckdb.connect().execute(
        "select installed from duckdb_extensions() where extension_name = ?", [name]).fetchall()
    return bool(rows and rows[0][0])


def skip_reasons() -> dict[str, str]:
    """Node id prefix -> reason, for this machine."""
    reasons = {prefix: f"needs the network: {why}" for prefix, why in NETWORK_SKIPS.items()}
    for prefix, (module, what) in PLUGIN_SKIPS.items():
        if not _has_module(module):
            reasons[prefix] = f"{what} is not installed ({module})"
    for extension, prefixes in EXTENSION_SKIPS.items():
        if not _extension_installed(extension):
            for prefix in prefixes:
                reasons[prefix] = f"needs the network: installs the DuckDB {extension} extension"
    return reasons


_stub_boto3()


@functools.cache
def not_collected() -> dict[str, str]:
    """Module path -> reason, for the modules left out of collection on this machine."""
    return {path: f"{what} is not installed ({module})"
            for path, (module, what) in IMPORT_NEEDS.items() if not _has_module(module)}


def pytest_ignore_collect(collection_path: Path, config):
    try:
        relative = collection_path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return None
    return True if relative in not_collected() else None


def _rewrite(profiles: dict) -> None:
    for profile in profiles.values():
        outputs = profile.get("outputs", {}) if isinstance(profile, dict) else {}
        for target in outputs.values():
            if isinstance(target, dict) and target.get("type") == "duckdb":
                target["type"] = ADAPTER


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    value = yield
    if fixturedef.argname == "dbt_profile_data" and ADAPTER != "duckdb":
        _rewrite(value)
    return value


def pytest_collection_modifyitems(config, items):
    reasons = skip_reasons()
    for item in items:
        for prefix, reason in reasons.items():
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.skip(reason=f"[quail suite] {reason}"))
                break


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    try:
        return (yield)
    finally:
        adapter = getattr(item, "funcargs", {}).get("adapter")
        if adapter is not None:
            item.user_properties.append(("adapter", adapter.type()))


def _outcome(previous: str | None, report) -> str:
    if report.failed:
        return "failed" if report.when == "call" else (previous if previous == "failed"
                                                          else "error")
    if previous in ("failed", "error"):
        return previous
    if report.skipped:
        return "xfailed" if hasattr(report, "wasxfail") else "skipped"
    if report.when == "call":
        return "xpassed" if hasattr(report, "wasxfail") else "passed"
    return previous or "passed"


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": None, "adapter": None})
    entry["outcome"] = _outcome(entry["outcome"], report)
    if report.skipped and isinstance(report.longrepr, tuple):
        entry["reason"] = str(report.longrepr[2]).removeprefix("Skipped: ").strip()
    for key, value in report.user_properties:
        if key == "adapter":
            entry["adapter"] = value


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("QUAIL_SUITE_RESULTS")
    if not path or hasattr(session.config, "workerinput"):
        return
    Path(path).write_text(json.dumps({"adapter": ADAPTER, "exitstatus": int(exitstatus),
                                      "tests": _results, "not_collected": not_collected()},
                                     indent=1, sort_keys=True))
