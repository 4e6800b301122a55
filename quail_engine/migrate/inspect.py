"""One migration end to end, without printing: read the project, detect its dialect, compile
it with dbt, find its AI calls (`inspect_project`), and plan the `--write` edits (`plan_edits`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from quail_engine.migrate.compile import CompiledProject, compile_project
from quail_engine.migrate.project import (
    DbtProject,
    Profiles,
    detect_dialect,
    find_profiles,
    read_project,
)
from quail_engine.migrate.report import Migration, calls_of
from quail_engine.migrate.write import Edit, dialect_edit, profile_edit, quail_output


@dataclass(frozen=True)
class Inspection:
    project: DbtProject
    profiles: Profiles
    compiled: CompiledProject
    migration: Migration


def inspect_project(directory: str, dialect: str | None = None,
                    profiles_dir: str | None = None) -> Inspection:
    """The project's AI calls with their status. `dialect` (--from) overrides detection."""
    project = read_project(directory)
    profiles = find_profiles(project, profiles_dir)
    if dialect:
        source = "given by --from"
    else:
        dialect = detect_dialect(project, profiles)
        source = f"detected from {_shown(profiles.path)}"
    with tempfile.TemporaryDirectory(prefix="quail-migrate-") as scratch:
        compiled = compile_project(project, dialect, Path(scratch))
    migration = Migration(dialect, source, compiled.nodes,
                          calls_of(compiled.nodes, compiled.resource_types))
    return Inspection(project, profiles, compiled, migration)


@dataclass(frozen=True)
class EditPlan:
    edits: tuple[Edit, ...]
    left_alone: str | None   # a profiles.yml outside the project, not edited: what to add
    target: str              # the quail output dbt builds with (`--target`)


def plan_edits(seen: Inspection, profiles_dir: str | None = None) -> EditPlan:
    """The edits `--write` makes (none when the project already runs on Quail)."""
    project, compiled, dialect = seen.project, seen.compiled, seen.migration.dialect
    kinds = compiled.resource_types
    sections = ["models"] if any(kinds[n] == "model" for n in compiled.unconfigured) else []
    edits = [dialect_edit(project.root / "dbt_project.yml", project.name, sections, dialect)]
    profile = project.profile or project.name
    path = seen.profiles.path or project.root / "profiles.yml"
    inside = path.parent == project.root
    left_alone = None
    edit = profile_edit(path, profile, dialect)
    target = edit.target if edit is not None else quail_output(seen.profiles) or "quail"
    if edit is not None and not inside and not profiles_dir:
        left_alone = (f"{path} is outside the project and was left alone; to run on Quail, add "
                      f"this output to its profile {profile!r} (or pass --profiles-dir "
                      f"{path.parent} to let --write add it):\n{_snippet(edit, path)}")
        edit = None
    edits.append(edit)
    return EditPlan(tuple(e for e in edits if e is not None), left_alone, target)


def _shown(path: Path) -> str:
    """`path` relative to the working folder when it lies under it."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _snippet(edit: Edit, path: Path) -> str:
    old = path.read_text(encoding="utf-8").splitlines()
    new = edit.text.splitlines()
    added = [line for i, line in enumerate(new) if i >= len(old) or line not in old]
    return "\n".join(added)


def apply(edits: tuple[Edit, ...]) -> None:
    """Write each edited file whole (a temporary file renamed over it)."""
    for edit in edits:
        tmp = edit.path.with_name(f".{edit.path.name}.quail-migrate")
        tmp.write_text(edit.text, encoding="utf-8")
        tmp.replace(edit.path)
