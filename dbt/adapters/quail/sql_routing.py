"""Which road a model's SQL takes: plain DuckDB, transpiled warehouse SQL, or the AI executor.

The check is lexical on purpose: it runs for every model, and a model without any AI call
must reach DuckDB byte-for-byte as dbt-duckdb would send it (no parse, no engine import).
Comments and string literals are blanked first so `-- ai_filter(...)` or `'ai.if('` in data
do not route a plain model to the engine.
"""

from __future__ import annotations

import re

from dbt_common.exceptions import DbtRuntimeError

from quail_engine import exec as quail

_COMMENTS_AND_STRINGS = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'", re.S)
_AI_CALL = re.compile(
    r"(?<![\w.])(?:snowflake\s*\.\s*)?(?:cortex\s*\.\s*\w+|ai_\w+|ai\s*\.\s*\w+|prompt"
    r"|ml\s*\.\s*generate_text)\s*\(",
    re.I,
)


def has_ai_functions(sql: str) -> bool:
    """True when `sql` calls a warehouse AI function (any of the three vendors' spellings)."""
    return _AI_CALL.search(_COMMENTS_AND_STRINGS.sub(" ", sql)) is not None


def to_duckdb(sql: str, dialect: str) -> str:
    """`sql` rewritten from `dialect` into DuckDB SQL; DuckDB SQL is returned unchanged."""
    if dialect == "duckdb":
        return sql
    try:
        return quail.to_duckdb_sql(sql, dialect)
    except quail.QuailError as exc:
        raise DbtRuntimeError(f"quail could not translate {dialect} SQL to DuckDB: {exc}") from exc
