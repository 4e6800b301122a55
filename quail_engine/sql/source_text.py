"""Reading the SQL a CLI command was given: a FILE or `-e SQL`."""

from __future__ import annotations

from pathlib import Path

from quail_engine.errors import QuailError


def read_sql(file: str | None, expression: str | None) -> str:
    if (file is None) == (expression is None):
        raise QuailError("give exactly one of FILE or -e SQL")
    if expression is not None:
        return expression
    path = Path(file)
    if not path.is_file():
        raise QuailError(f"no such SQL file: {file}")
    return path.read_text(encoding="utf-8")
