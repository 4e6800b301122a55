"""Exception types users see. Every error names the problem and quotes the SQL or value; the CLI
prints the message (no traceback) and exits with code 2."""

from __future__ import annotations


class QuailError(Exception):
    """Base of all user-facing errors."""


class SqlError(QuailError):
    """The SQL cannot be read or planned. `fragment` is the offending SQL, quoted in the message."""

    def __init__(self, message: str, fragment: str | None = None, dialect: str | None = None):
        self.fragment = fragment
        self.dialect = dialect
        where = f" [{dialect}]" if dialect else ""
        quoted = f"\n  in: {fragment}" if fragment else ""
        super().__init__(f"{message}{where}{quoted}")


class UnsupportedError(SqlError):
    """A construct we read but cannot run or emit faithfully in the requested dialect."""


class ModelError(QuailError):
    """A model cannot be found, loaded or used (message names the install command or path)."""


class ExecutionError(QuailError):
    """A query failed while running (unknown table or column, interrupted run, ...)."""
