"""dbt-tests-adapter fixtures with a `type: quail` profile (one DuckDB file per test class).

The fixtures are imported rather than listed in `pytest_plugins`, which pytest only honours in
the rootdir conftest; importing them scopes them to this folder. QUAIL_TEST_DIALECT sets the
profile's default `dialect` (run the conformance suite with snowflake, bigquery, databricks).
"""

import os

import pytest
from dbt.tests.fixtures.project import *  # noqa: F401,F403

os.environ.setdefault("DO_NOT_TRACK", "1")


@pytest.fixture(scope="class")
def dbt_profile_target(tmp_path_factory):
    root = tmp_path_factory.mktemp("quail")
    return {"type": "quail", "threads": 4, "path": str(root / "test.duckdb"),
            "cache_dir": str(root / "answers"),
            "dialect": os.environ.get("QUAIL_TEST_DIALECT", "duckdb")}
