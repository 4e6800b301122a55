"""SQL front-end errors: each a `SqlError` (CLI exit 2) that quotes the offending fragment."""

from __future__ import annotations

from quail_engine.errors import SqlError, UnsupportedError

__all__ = [
    "ArgumentError",
    "LabelsNotLiteralError",
    "PlaceholderError",
    "SqlError",
    "UnknownAiFunctionError",
    "UnsupportedError",
    "UnsupportedPositionError",
]


class UnknownAiFunctionError(SqlError):
    """A call that looks like an AI function (AI_*, AI.*, ai_*, SNOWFLAKE.CORTEX.*) but is not one
    of the dialect's functions."""


class ArgumentError(SqlError):
    """Wrong number of arguments, an unknown named argument, or an argument of the wrong kind."""


class PlaceholderError(SqlError):
    """A `{n}` placeholder in a prompt template with no argument to fill it."""


class LabelsNotLiteralError(SqlError):
    """Labels (categories, fields, option values) must be literals: the plan needs them before
    any row is read."""


class UnsupportedPositionError(SqlError):
    """An AI function where it cannot run: nested in another AI function, an aggregate AI
    function outside SELECT/HAVING/ORDER BY, PROMPT() outside an AI function, LIMIT, ..."""
