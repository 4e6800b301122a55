"""A dbt project on disk: its dbt_project.yml, the profiles.yml holding its profile, and the
warehouse dialect its adapter speaks.

Where the profile is looked for, in dbt's own order: `--profiles-dir`, $DBT_PROFILES_DIR, the
project folder, ~/.dbt. The dialect is the type of the profile's default target (snowflake,
bigquery, databricks; spark means Databricks); a `type: quail` target gives its `dialect`; when
neither tells, the one warehouse type among the other outputs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from quail_engine.errors import QuailError, shorten

WAREHOUSES = ("snowflake", "bigquery", "databricks")
_ADAPTER_DIALECT = {"snowflake": "snowflake", "bigquery": "bigquery",
                    "databricks": "databricks", "spark": "databricks"}


class MigrateError(QuailError):
    """The project cannot be migrated as given (not a dbt project, no dialect, ...)."""


@dataclass(frozen=True)
class DbtProject:
    root: Path
    name: str
    profile: str | None


@dataclass(frozen=True)
class Profiles:
    """The profiles.yml found for a project (`path` None when there is none) and the project's
    profile in it (`profile` empty when the file lacks it)."""

    path: Path | None
    profile: dict[str, Any] = field(default_factory=dict)

    @property
    def outputs(self) -> dict[str, Any]:
        outputs = self.profile.get("outputs")
        return outputs if isinstance(outputs, dict) else {}


def read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MigrateError(f"cannot read {path}: {shorten(exc, 160)}") from None


def read_project(directory: str | Path) -> DbtProject:
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise MigrateError(f"{directory}: no such directory")
    if not (root / "dbt_project.yml").is_file():
        raise MigrateError(f"{directory} is not a dbt project (it has no dbt_project.yml)")
    config = read_yaml(root / "dbt_project.yml")
    name = config.get("name") if isinstance(config, dict) else None
    if not isinstance(name, str) or not name:
        raise MigrateError(f"{root / 'dbt_project.yml'} names no project (no 'name:')")
    profile = config.get("profile")
    return DbtProject(root.resolve(), name, profile if isinstance(profile, str) else None)


def profile_candidates(project: DbtProject, profiles_dir: str | None) -> list[Path]:
    if profiles_dir:
        return [Path(profiles_dir).expanduser() / "profiles.yml"]
    folders = [Path(p) for p in (os.environ.get("DBT_PROFILES_DIR"),) if p]
    folders += [project.root, Path.home() / ".dbt"]
    return [f / "profiles.yml" for f in folders]


def find_profiles(project: DbtProject, profiles_dir: str | None = None) -> Profiles:
    """The first profiles.yml that exists among the candidates (dbt's order)."""
    for path in profile_candidates(project, profiles_dir):
        if path.is_file():
            data = read_yaml(path) or {}
            entry = data.get(project.profile or project.name) if isinstance(data, dict) else None
            return Profiles(path.resolve(), entry if isinstance(entry, dict) else {})
    if profiles_dir:
        raise MigrateError(f"--profiles-dir {profiles_dir} holds no profiles.yml")
    return Profiles(None)


def detect_dialect(project: DbtProject, profiles: Profiles) -> str:
    """The warehouse dialect of the project's adapter, or a MigrateError saying what was seen."""
    name = project.profile or project.name
    if profiles.path is None:
        raise MigrateError(f"cannot detect the dialect: no profiles.yml found for the profile "
                           f"{name!r} (looked in {project.root} and ~/.dbt); pass "
                           f"--from {'|'.join(WAREHOUSES)}")
    if not profiles.profile:
        raise MigrateError(f"cannot detect the dialect: {profiles.path} has no profile {name!r}; "
                           f"pass --from {'|'.join(WAREHOUSES)}")
    outputs = profiles.outputs
    target = _render(profiles.profile.get("target")) or "default"
    seen = _dialect_of(outputs.get(target))
    if seen is None:
        others = {_dialect_of(o) for o in outputs.values()} - {None}
        seen = others.pop() if len(others) == 1 else None
    if seen is None:
        types = sorted({str(_render(o.get("type"))) for o in outputs.values()
                        if isinstance(o, dict)})
        raise MigrateError(f"cannot detect the dialect: profile {name!r} in {profiles.path} has "
                           f"targets of type {', '.join(types) or 'none'}; pass "
                           f"--from {'|'.join(WAREHOUSES)}")
    return seen


def _dialect_of(output: Any) -> str | None:
    if not isinstance(output, dict):
        return None
    kind = str(_render(output.get("type")) or "").lower()
    if kind == "quail":
        dialect = str(_render(output.get("dialect")) or "").lower()
        return dialect if dialect in WAREHOUSES else None
    return _ADAPTER_DIALECT.get(kind)


def _render(value: Any) -> Any:
    """`{{ env_var('X', 'default') }}` in a profile field, rendered as dbt would (env_var only)."""
    if not isinstance(value, str) or "{{" not in value:
        return value
    import jinja2  # only for a templated profile field; cli/migrate imports this module

    def env_var(var: str, default: str | None = None) -> str:
        return os.environ.get(var, default if default is not None else "")

    try:
        return jinja2.Environment().from_string(value).render(env_var=env_var)
    except jinja2.TemplateError:
        return value
