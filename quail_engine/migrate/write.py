"""`quail migrate --write`: the two edits that move a project, made as text so the files keep
their comments and layout, each checked by reading the YAML back (the result must equal the
old file plus exactly the added keys; otherwise nothing is written and the error says what to
add by hand).

- dbt_project.yml: `+quail_dialect: <dialect>` under `models: <project>:` unless dbt already
  resolves a quail_dialect for every model.
- profiles.yml: an output `quail` (`type: quail`, the dialect, the embedded model) beside the
  existing outputs, whose own entries are never touched; `target:` stays as it was, so
  `dbt build --target quail` runs the project on Quail.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from quail_engine.migrate.project import MigrateError

_KEY = re.compile(r"^(?P<indent>\s*)(?P<q>['\"]?)(?P<key>[^'\":#\s][^'\":#]*?)(?P=q)\s*:"
                  r"\s*(?P<rest>.*?)\s*$")


@dataclass(frozen=True)
class Edit:
    path: Path
    text: str          # the new file text
    summary: str       # one line: what was added
    target: str | None = None  # the output added to a profile


def dialect_edit(path: Path, project: str, sections: list[str], dialect: str) -> Edit | None:
    """`+quail_dialect: <dialect>` under `<section>: <project>:` for each of `sections`."""
    if not sections:
        return None
    old = path.read_text(encoding="utf-8")
    text = old
    expected = copy.deepcopy(yaml.safe_load(old) or {})
    for section in sections:
        text = add_mapping_key(text, [section, project], "+quail_dialect", dialect)
        expected.setdefault(section, {})
        expected[section] = expected[section] or {}
        expected[section].setdefault(project, {})
        expected[section][project] = expected[section][project] or {}
        expected[section][project]["+quail_dialect"] = dialect
    _check(path, text, expected, f"+quail_dialect: {dialect} under {sections[0]}: {project}:")
    where = " and ".join(f"{s}: {project}:" for s in sections)
    return Edit(path, text, f"{path.name}: added +quail_dialect: {dialect} under {where}")


def profile_output(dialect: str, threads: Any = None) -> dict[str, Any]:
    return {"type": "quail", "path": "target/quail.duckdb", "dialect": dialect,
            "model": "embedded", "device": "auto",
            "threads": threads if isinstance(threads, int) else 4}


def output_name(outputs: dict[str, Any]) -> str:
    return next(n for n in ("quail", "quail_local", "quail_migrated") if n not in outputs)


def profile_edit(path: Path, profile: str, dialect: str) -> Edit | None:
    """An output `quail` (see `profile_output`) in `profile` of `path`; None when the profile
    already has a `type: quail` output."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    data = (yaml.safe_load(old) or {}) if old else {}
    entry = data.get(profile) if isinstance(data, dict) else None
    entry = entry if isinstance(entry, dict) else None
    outputs = (entry.get("outputs") or {}) if entry is not None else {}
    if any(isinstance(o, dict) and o.get("type") == "quail" for o in outputs.values()):
        return None
    target = entry.get("target") if entry is not None else None
    threads = (outputs.get(target) or {}).get("threads") if isinstance(target, str) else None
    name = output_name(outputs)
    body = profile_output(dialect, threads)
    if entry is None:
        text = (old.rstrip("\n") + "\n\n" if old.strip() else "") + yaml.safe_dump(
            {profile: {"target": name, "outputs": {name: body}}}, sort_keys=False)
    else:
        text = add_mapping_key(old, [profile, "outputs"], name, body,
                               comment="added by quail migrate: dbt build --target " + name)
    expected = copy.deepcopy(data) if isinstance(data, dict) else {}
    if entry is None:
        expected[profile] = {"target": name, "outputs": {name: body}}
    else:
        expected[profile].setdefault("outputs", {})
        expected[profile]["outputs"] = expected[profile]["outputs"] or {}
        expected[profile]["outputs"][name] = body
    _check(path, text, expected, f"an output {name!r} of type quail to the profile {profile!r}")
    return Edit(path, text, f"{path.name}: added the output {name!r} (type: quail, dialect: "
                            f"{dialect}, the embedded model) to the profile {profile!r}", name)


def quail_output(profiles: Any) -> str | None:
    """The name of the profile's `type: quail` output, if it has one."""
    return next((n for n, o in profiles.outputs.items()
                 if isinstance(o, dict) and o.get("type") == "quail"), None)


def add_mapping_key(text: str, keys: list[str], key: str, value: Any,
                    comment: str | None = None) -> str:
    """`text` with `key: value` added to the block mapping at `keys` (created when missing),
    as the first entry of an existing block (the last, for a mapping `value`)."""
    lines = text.splitlines(keepends=True)
    start, indent, parent_indent = 0, -1, -1
    end = len(lines)
    for depth, name in enumerate(keys):
        found = _find_key(lines, start, end, name, parent_indent)
        if found is None:
            block: dict[str, Any] = {name: {}}
            nested = block[name]
            for inner in keys[depth + 1:]:
                nested[inner] = {}
                nested = nested[inner]
            nested[key] = value
            child = _child_indent(lines, start, end, parent_indent)
            return _insert(lines, start if depth else end, _dump(block, child), at_start=depth > 0)
        index, indent = found
        rest = _KEY.match(lines[index].rstrip("\n")).group("rest")
        if rest and not rest.startswith("#"):
            raise MigrateError(f"cannot add {key} under {': '.join(keys)}: that entry is written "
                               f"on one line ({rest[:40]}); add it by hand")
        parent_indent, start, end = indent, index + 1, _block_end(lines, index + 1, end, indent)
    child = _child_indent(lines, start, end, parent_indent)
    entry = _dump({key: value}, child, comment)
    if isinstance(value, dict):
        while end > start and not lines[end - 1].strip():
            end -= 1
        return _insert(lines, end, entry, at_start=False)
    return _insert(lines, start, entry, at_start=True)


def _find_key(lines: list[str], start: int, end: int, name: str,
              parent_indent: int) -> tuple[int, int] | None:
    level = None
    for i in range(start, end):
        m = _KEY.match(lines[i].rstrip("\n"))
        if not lines[i].strip() or lines[i].lstrip().startswith("#") or m is None:
            continue
        width = len(m.group("indent"))
        if width <= parent_indent:
            break
        level = width if level is None else level
        if width == level and m.group("key") == name:
            return i, width
    return None


def _block_end(lines: list[str], start: int, end: int, indent: int) -> int:
    for i in range(start, end):
        stripped = lines[i].strip()
        if stripped and not stripped.startswith("#"):
            if len(lines[i]) - len(lines[i].lstrip()) <= indent:
                return i
    return end


def _child_indent(lines: list[str], start: int, end: int, parent_indent: int) -> int:
    for i in range(start, end):
        stripped = lines[i].strip()
        if stripped and not stripped.startswith("#"):
            width = len(lines[i]) - len(lines[i].lstrip())
            if width > parent_indent:
                return width
            break
    return parent_indent + 2 if parent_indent >= 0 else 0


def _dump(block: dict[str, Any], indent: int, comment: str | None = None) -> list[str]:
    text = yaml.safe_dump(block, sort_keys=False, default_flow_style=False, indent=2)
    out = [" " * indent + line + "\n" for line in text.splitlines()]
    if comment:
        out[0] = out[0].rstrip("\n") + f"  # {comment}\n"
    return out


def _insert(lines: list[str], at: int, new: list[str], at_start: bool) -> str:
    """`new` lines inserted before line `at`; a new top-level block at the end of the file is
    set apart by a blank line."""
    if at > 0 and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    is_top = bool(new) and not new[0].startswith(" ")
    if not at_start and at == len(lines) and lines and lines[-1].strip() and is_top:
        new = ["\n", *new]
    return "".join(lines[:at] + new + lines[at:])


def _check(path: Path, text: str, expected: Any, what: str) -> None:
    try:
        ok = yaml.safe_load(text) == expected
    except yaml.YAMLError:
        ok = False
    if not ok:
        raise MigrateError(f"cannot add {what} to {path} without changing its other entries; "
                           "add it by hand")
