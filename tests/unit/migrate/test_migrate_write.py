"""--write's text edits: the key lands where dbt reads it, comments and order stay, and the
YAML read back equals the old one plus the key."""

import pytest
import yaml

from quail_engine.migrate.project import MigrateError
from quail_engine.migrate.write import add_mapping_key, dialect_edit, profile_edit

PROJECT = """\
name: shop  # the project
models:
  # project models
  shop:
    +materialized: table
    staging:
      +materialized: view
seeds:
  shop:
    +quote_columns: false
"""


@pytest.mark.parametrize(("text", "expected"), [
    (PROJECT, {"+quail_dialect": "snowflake", "+materialized": "table",
               "staging": {"+materialized": "view"}}),
    ("name: shop\n", {"+quail_dialect": "snowflake"}),
    ("name: shop\nmodels:\n    other:\n        +a: 1\n", {"+quail_dialect": "snowflake"}),
    ("name: shop\nmodels:\n  shop:\nseeds: {}\n", {"+quail_dialect": "snowflake"}),
])
def test_quail_dialect_under_models_project(tmp_path, text, expected):
    path = tmp_path / "dbt_project.yml"
    path.write_text(text)
    edit = dialect_edit(path, "shop", ["models"], "snowflake")
    assert yaml.safe_load(edit.text)["models"]["shop"] == expected
    assert "models: shop:" in edit.summary


def test_comments_and_other_lines_stay(tmp_path):
    path = tmp_path / "dbt_project.yml"
    path.write_text(PROJECT)
    new = dialect_edit(path, "shop", ["models"], "bigquery").text
    assert [ln for ln in new.splitlines() if "quail_dialect" not in ln] == PROJECT.splitlines()
    assert "  shop:\n    +quail_dialect: bigquery\n    +materialized: table" in new


def test_a_one_line_entry_is_refused_not_rewritten(tmp_path):
    path = tmp_path / "dbt_project.yml"
    path.write_text("name: shop\nmodels:\n  shop: {+materialized: table}\n")
    with pytest.raises(MigrateError, match="add it by hand"):
        dialect_edit(path, "shop", ["models"], "snowflake")


def test_nothing_to_add_is_no_edit(tmp_path):
    assert dialect_edit(tmp_path / "dbt_project.yml", "shop", [], "snowflake") is None


PROFILES = """\
# our warehouse
shop:
  target: prod
  outputs:
    prod:
      type: snowflake
      account: "{{ env_var('ACCOUNT') }}"   # from the environment
      threads: 8

other:
  target: dev
  outputs:
    dev: {type: duckdb}
"""


def test_a_quail_output_beside_theirs(tmp_path):
    path = tmp_path / "profiles.yml"
    path.write_text(PROFILES)
    edit = profile_edit(path, "shop", "snowflake")
    data = yaml.safe_load(edit.text)
    assert data["shop"]["target"] == "prod"
    assert data["shop"]["outputs"]["prod"] == yaml.safe_load(PROFILES)["shop"]["outputs"]["prod"]
    quail = data["shop"]["outputs"]["quail"]
    assert quail["type"] == "quail" and quail["dialect"] == "snowflake" and quail["threads"] == 8
    assert data["other"] == yaml.safe_load(PROFILES)["other"]
    assert edit.text.startswith(PROFILES.split("\n\nother")[0])
    assert edit.target == "quail"
    path.write_text(edit.text)
    assert profile_edit(path, "shop", "snowflake") is None


def test_a_taken_name_and_a_missing_file(tmp_path):
    path = tmp_path / "profiles.yml"
    path.write_text("p:\n  target: quail\n  outputs:\n    quail:\n      type: snowflake\n")
    assert profile_edit(path, "p", "snowflake").target == "quail_local"
    fresh = profile_edit(tmp_path / "new" / "profiles.yml", "p", "bigquery")
    assert yaml.safe_load(fresh.text)["p"]["outputs"]["quail"]["dialect"] == "bigquery"


def test_add_mapping_key_creates_the_path():
    text = add_mapping_key("a: 1\n", ["snapshots", "shop"], "+quail_dialect", "bigquery")
    assert yaml.safe_load(text) == {"a": 1, "snapshots": {"shop": {"+quail_dialect": "bigquery"}}}


def _inspection(root, profiles_path):
    from quail_engine.migrate.calls import CompiledNode
    from quail_engine.migrate.compile import CompiledProject
    from quail_engine.migrate.inspect import Inspection
    from quail_engine.migrate.project import find_profiles, read_project
    from quail_engine.migrate.report import Migration

    project = read_project(root)
    node = CompiledNode("model.shop.m", "models/m.sql", "snowflake", "select 1", None)
    compiled = CompiledProject((node,), {"model.shop.m": "model"}, frozenset({"model.shop.m"}))
    profiles = find_profiles(project, str(profiles_path.parent))
    return Inspection(project, profiles, compiled, Migration("snowflake", "", (node,), ()))


def test_a_profiles_yml_outside_the_project_is_edited_only_when_named(tmp_path):
    from quail_engine.migrate.inspect import plan_edits

    root, home = tmp_path / "shop", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    (root / "dbt_project.yml").write_text(PROJECT + "profile: shop\n")
    (home / "profiles.yml").write_text(PROFILES)
    seen = _inspection(root, home / "profiles.yml")

    plan = plan_edits(seen)
    assert [e.path.name for e in plan.edits] == ["dbt_project.yml"]
    assert "outside the project and was left alone" in plan.left_alone
    assert "    quail:" in plan.left_alone and "dialect: snowflake" in plan.left_alone

    plan = plan_edits(seen, str(home))
    assert [e.path.name for e in plan.edits] == ["dbt_project.yml", "profiles.yml"]
    assert plan.left_alone is None and plan.target == "quail"
