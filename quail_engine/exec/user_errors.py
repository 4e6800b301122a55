"""What a user reads when DuckDB refuses a statement.

DuckDB runs a rewritten statement in which each AI call is `quail_ai_<id>_<suffix>(...)`. Its
messages quote that statement and those names; the user wrote neither. `statement_error` keeps
DuckDB's message (without its `LINE n:` excerpt of the rewritten SQL), puts the AI function the
user wrote where an internal name stood (`scrub`), and quotes the user's own SQL instead.
"""

from __future__ import annotations

import re

from quail_engine.errors import ExecutionError, shorten

MAX_QUOTE = 200
MAX_MESSAGE = 400  # characters of DuckDB's own message a user sees (an identifier can be 100k)
_INTERNAL = re.compile(r"\bquail_ai_(\w+)", re.I)
_OP_NAME = re.compile(r"^(\d+)(?:_[0-9a-f]+)?$", re.I)
_VENDOR_NAME = re.compile(r"\s*([A-Za-z_][\w.]*)\s*\(")
_MISSING_TABLE = re.compile(r"^Catalog Error: Table with name (.+?) does not exist!?$")
_SUGGESTION = re.compile(r'^Did you mean "(.+)"\?$')
_SYSTEM_NAMES = ("pg_", "duckdb_", "sqlite_", "information_schema", "quail_")
_FILE = re.compile(r"^\s*file = (.+?)\s*$", re.M)
_FILE_PROBLEMS = (  # DuckDB's words (named groups: file, detail, line) -> our reason
    (re.compile(r"No magic bytes found at end of file '(?P<file>.+?)'"),
     "not a Parquet file, or truncated"),
    (re.compile(r'Failed to read file "(?P<file>.+?)": (?P<detail>.+)'),
     "corrupt Parquet ({detail})"),
    (re.compile(r'Malformed JSON in file "(?P<file>.+?)", (?P<detail>at byte \d+ in record/value '
                r'\d+)'), "malformed JSON ({detail})"),
    (re.compile(r"CSV Error on Line: (?P<line>\d+)[\s\S]*not utf-8 encoded"),
     "line {line} is not UTF-8 text (re-encode the file as UTF-8)"),
    (re.compile(r'Cannot access (?:file|directory) "(?P<file>.+?)" - file system operations '
                r"are disabled"),
     "quail query reads only the files given with --table or --database (pass it as "
     "--table NAME=PATH)"),
)
_LEADING_COMMENTS = re.compile(r"^\s*(?:/\*.*?\*/\s*|--[^\n]*\n\s*)*", re.S)


class MissingTableError(ExecutionError):
    """The statement reads a table that no --table, --database or catalog entry defines."""

    def __init__(self, table: str, sql: str, suggestion: str | None = None,
                 hint: str | None = None):
        self.table, self.sql, self.suggestion = table, sql, suggestion
        hint = hint if hint is not None else (
            f"pass it with --table {table}=PATH (or --database FILE.duckdb)")
        near = f" (did you mean {suggestion!r}?)" if suggestion else ""
        super().__init__(f"table {table!r} is not defined{near}: {hint}{_in(sql)}")


def scrub(text: str, ai_ops=()) -> str:
    """`text` with every internal `quail_ai_...` name replaced by the vendor function the user
    wrote for that operator (read from its `origin`), or `<AI function>`."""
    def vendor(match: re.Match) -> str:
        op_id = _OP_NAME.match(match.group(1))
        if op_id and int(op_id.group(1)) < len(ai_ops):
            name = _VENDOR_NAME.match(getattr(ai_ops[int(op_id.group(1))], "origin", "") or "")
            if name:
                return name.group(1)
        return "<AI function>"

    return _INTERNAL.sub(vendor, text)


def quote_sql(sql: str) -> str:
    """The user's statement on one line, without dbt's leading query comment, at most
    MAX_QUOTE characters."""
    return shorten(_LEADING_COMMENTS.sub("", sql or ""), MAX_QUOTE)


def statement_error(exc: BaseException, parsed, prefix: str = "") -> ExecutionError:
    """The ExecutionError a user sees for DuckDB's `exc` on the statement `parsed` (a
    ParsedQuery: its `source_sql` is quoted, its `ai_ops` name the AI functions)."""
    source = getattr(parsed, "source_sql", "")
    ops = getattr(parsed, "ai_ops", ())
    lines = _message_lines(str(exc))
    missing = _MISSING_TABLE.match(lines[0]) if lines else None
    if missing:
        near = _SUGGESTION.match(lines[1]) if len(lines) > 1 else None
        return MissingTableError(shorten(scrub(missing.group(1), ops), 120), source,
                                 near.group(1) if near else None)
    problem = file_problem(str(exc))
    if problem:
        file, reason = problem
        return ExecutionError(f"{prefix}cannot read {shorten(file or 'a data file', 200)!r}: "
                              f"{shorten(reason, 200)}{_in(source)}")
    text = shorten(scrub(" ".join(lines) or type(exc).__name__, ops), MAX_MESSAGE)
    return ExecutionError(f"{prefix}{text}{_in(source)}")


def scan_error(exc: BaseException, alias: str) -> ExecutionError:
    """The ExecutionError for DuckDB's `exc` while scanning the relation `alias` (its scan is
    rewritten SQL: not quoted)."""
    problem = file_problem(str(exc))
    if problem:
        return ExecutionError(f"cannot read {shorten(problem[0] or alias, 200)!r}: "
                              f"{shorten(problem[1], 200)}")
    lines = _message_lines(str(exc))
    text = shorten(scrub(" ".join(lines) or type(exc).__name__), MAX_MESSAGE)
    return ExecutionError(f"cannot scan relation {shorten(alias, 80)!r}: {text}")


def file_problem(message: str) -> tuple[str | None, str] | None:
    """(file, reason) when DuckDB's `message` says a data file cannot be read, else None.
    `file` is None where DuckDB's message does not name it."""
    for pattern, reason in _FILE_PROBLEMS:
        found = pattern.search(message)
        if found:
            fields = found.groupdict()
            named = _FILE.search(message)
            return fields.get("file") or (named.group(1) if named else None), reason.format(
                **fields)
    return None


def _message_lines(message: str) -> list[str]:
    """DuckDB's first line and its short hints (`Did you mean`, `Candidate bindings`), without
    the `LINE n:` excerpt, candidate-function lists or suggestions of system tables."""
    lines = [line.strip() for line in message.replace("EXPLAIN ", "", 1).splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return []
    kept = [lines[0]]
    for line in lines[1:]:
        suggestion = _SUGGESTION.match(line)
        if suggestion and not suggestion.group(1).lower().startswith(_SYSTEM_NAMES):
            kept.append(line)
        elif line.startswith("Candidate bindings:") and len(line) <= MAX_QUOTE:
            kept.append(line)
    return kept


def _in(sql: str) -> str:
    quoted = quote_sql(sql)
    return f" in: {quoted}" if quoted else ""
