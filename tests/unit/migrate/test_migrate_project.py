"""Which dialect a project's adapter speaks, read from its profile; bad input is one error."""

import pytest
import yaml

from quail_engine.migrate.project import (
    MigrateError,
    detect_dialect,
    find_profiles,
    read_project,
)


def _project(root, outputs, target="dev"):
    (root / "dbt_project.yml").write_text("name: p\nprofile: prof\nconfig-version: 2\n")
    (root / "profiles.yml").write_text(yaml.safe_dump(
        {"prof": {"target": target, "outputs": outputs}}))
    return read_project(root)


@pytest.mark.parametrize(("outputs", "expected"), [
    ({"dev": {"type": "snowflake"}}, "snowflake"),
    ({"dev": {"type": "bigquery"}}, "bigquery"),
    ({"dev": {"type": "databricks"}}, "databricks"),
    ({"dev": {"type": "spark"}}, "databricks"),
    ({"dev": {"type": "quail", "dialect": "bigquery"}}, "bigquery"),
    ({"dev": {"type": "duckdb"}, "prod": {"type": "snowflake"}}, "snowflake"),
    ({"dev": {"type": "{{ env_var('QUAIL_MIGRATE_TEST_TYPE', 'bigquery') }}"}}, "bigquery"),
])
def test_dialect_from_the_profile(tmp_path, outputs, expected):
    project = _project(tmp_path, outputs)
    assert detect_dialect(project, find_profiles(project)) == expected


@pytest.mark.parametrize("outputs", [
    {"dev": {"type": "postgres"}},
    {"dev": {"type": "duckdb"}, "a": {"type": "snowflake"}, "b": {"type": "bigquery"}},
])
def test_an_undetectable_dialect_is_one_error_naming_from(tmp_path, outputs):
    project = _project(tmp_path, outputs)
    with pytest.raises(MigrateError, match="cannot detect the dialect.*--from"):
        detect_dialect(project, find_profiles(project))


def test_profiles_dir_wins_over_the_project_folder(tmp_path):
    project = _project(tmp_path, {"dev": {"type": "snowflake"}})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "profiles.yml").write_text(yaml.safe_dump(
        {"prof": {"target": "x", "outputs": {"x": {"type": "bigquery"}}}}))
    profiles = find_profiles(project, str(elsewhere))
    assert detect_dialect(project, profiles) == "bigquery"


def test_not_a_dbt_project(tmp_path):
    with pytest.raises(MigrateError, match="is not a dbt project"):
        read_project(tmp_path)
    with pytest.raises(MigrateError, match="no such directory"):
        read_project(tmp_path / "missing")
