"""Exception types users see. Every error is one line that names the problem and quotes the SQL
or value (shortened by `shorten`); the CLI prints the message (no traceback) and exits with
code 2."""

from __future__ import annotations

QUOTE_LIMIT = 200     # characters of user input one quote may show
MESSAGE_LIMIT = 300   # characters of a whole SqlError message, quote included


def shorten(text: object, limit: int = QUOTE_LIMIT) -> str:
    """`text` as one line of at most about `limit` characters: whitespace runs become one
    space, and a long text keeps its head and tail around a count of what was left out."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    tail = max(limit // 5, 1)
    head = max(limit - tail - len(f" ...[{len(flat):,} characters]... "), 1)
    return f"{flat[:head]} ...[{len(flat) - head - tail:,} characters]... {flat[-tail:]}"


class QuailError(Exception):
    """Base of all user-facing errors."""


class SqlError(QuailError):
    """The SQL cannot be read or planned. `fragment` is the offending SQL, quoted (shortened)
    after the message: `<message> [<dialect>] in: <fragment>`, all on one line."""

    def __init__(self, message: str, fragment: str | None = None, dialect: str | None = None):
        self.reason = shorten(message, MESSAGE_LIMIT - 80)
        self.fragment = fragment
        self.dialect = dialect
        head = self.reason + (f" [{dialect}]" if dialect else "")
        budget = max(MESSAGE_LIMIT - len(head) - 5, 60)
        quoted = f" in: {shorten(fragment, min(budget, QUOTE_LIMIT))}" if fragment else ""
        super().__init__(f"{head}{quoted}")


class UnsupportedError(SqlError):
    """A construct we read but cannot run or emit faithfully in the requested dialect."""


class ModelError(QuailError):
    """A model cannot be found, loaded or used (message names the install command or path)."""


class ExecutionError(QuailError):
    """A query failed while running (unknown table or column, interrupted run, ...)."""
