"""Which dialect a statement was written in, when it fails in the one the user chose.

BigQuery's `AI.IF((...))` read as DuckDB SQL is DuckDB's `if` macro, and fails to bind with a
message that does not mention dialects at all. When a statement fails to parse or bind, every
other dialect's reader is tried: one that finds more AI functions in it than the chosen dialect
did is named, with the caller's advice on how to select it.
"""

from __future__ import annotations

import logging

from quail_engine.errors import QuailError
from quail_engine.settings import DIALECTS

LABELS = {"snowflake": "Snowflake", "bigquery": "BigQuery", "databricks": "Databricks",
          "duckdb": "DuckDB"}


def _num_ai_ops(sql: str, dialect: str) -> int:
    """AI functions `dialect` reads in `sql`; -1 when it cannot read the statement. sqlglot's
    own warnings are not logged: they are about readings the user did not ask for."""
    from quail_engine.sql.query import parse  # (deferred: sqlglot; the facade imports this)

    sqlglot_log = logging.getLogger("sqlglot")
    level = sqlglot_log.level
    sqlglot_log.setLevel(logging.ERROR)
    try:
        return len(parse(sql, dialect).ai_ops)
    except Exception:  # noqa: BLE001 - any reader failure means "not this dialect"
        return -1
    finally:
        sqlglot_log.setLevel(level)


def guess_dialects(sql: str, dialect: str) -> tuple[str, ...]:
    """The other dialects that read the most AI functions in `sql`, when that is more than
    `dialect` reads (in DIALECTS order; empty when none does better)."""
    baseline = max(_num_ai_ops(sql, dialect), 0)
    counts = {d: _num_ai_ops(sql, d) for d in DIALECTS if d != dialect.lower()}
    best = max(counts.values(), default=0)
    if best <= baseline:
        return ()
    return tuple(d for d, n in counts.items() if n == best)


def dialect_hint(sql: str, dialect: str, advice: str = "add --dialect {name}") -> str | None:
    """'this looks like BigQuery SQL: add --dialect bigquery', or None. `advice` is formatted
    with each guessed dialect's `name`."""
    names = guess_dialects(sql, dialect)
    if not names:
        return None
    labels = " or ".join(LABELS.get(n, n) for n in names)
    others = f" (or {', '.join(names[1:])})" if len(names) > 1 else ""
    return f"this looks like {labels} SQL: {advice.format(name=names[0])}{others}"


def with_dialect_hint(exc: QuailError, sql: str, dialect: str,
                      advice: str = "add --dialect {name}") -> QuailError:
    """`exc`, led by the dialect hint when another dialect reads `sql` better. Not for an
    error about the arguments of a function the chosen dialect knows (501 labels, an option
    of the wrong type): the user wrote that dialect's function and the error names what is
    wrong with it, where another dialect that happens to accept the arguments would only
    mislead ("this looks like DuckDB SQL" for too many Snowflake labels)."""
    from quail_engine.sql.errors import ArgumentError, LabelsNotLiteralError, PlaceholderError

    if isinstance(exc, ArgumentError | LabelsNotLiteralError | PlaceholderError):
        return exc
    hint = dialect_hint(sql, dialect, advice)
    return exc if hint is None else QuailError(f"{hint}; read as {dialect} SQL: {exc}")
