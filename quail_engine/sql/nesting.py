"""Deeply nested SQL: a bound checked on the token stream before sqlglot parses, and a guard
that gives the front end's recursive code (sqlglot's parser and generator, our walkers) enough
Python stack for any statement within the bound.

sqlglot's recursive-descent parser spends ~20-28 Python frames per level of nesting (measured
with sqlglot 30.30: parentheses, function calls, subqueries, CASE, arrays), so the default
recursion limit of 1,000 fails near 40 levels. Within `deep_stack()` the limit is at least
RECURSION_FLOOR; `MAX_NESTING` levels then need under half of it. Python-to-Python calls do not
grow the C stack (3.11+), so the raised limit stays safe for it. A RecursionError that escapes
anyway (a chain the token bound does not see: `a.b.c...`, `x::INT::INT...`) becomes a
one-line error too.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlglot.tokens import Token, TokenType

from quail_engine.errors import SqlError

MAX_NESTING = 100
# Python 3.10 still recurses on the C stack for every Python call: a lower floor keeps it safe.
RECURSION_FLOOR = 8000 if sys.version_info >= (3, 11) else 4000

OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE}
CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END}
PREFIX = {TokenType.NOT, TokenType.DASH, TokenType.PLUS, TokenType.TILDE, TokenType.EXCLAMATION}

_lock = threading.Lock()
_users = 0
_saved: int | None = None


def too_deep(sql: str, dialect: str | None) -> SqlError:
    return SqlError(f"expression nested too deeply (limit {MAX_NESTING} levels of parentheses, "
                    "brackets, CASE or prefix operators)", sql, dialect)


def too_long_chain(sql: str, dialect: str | None) -> SqlError:
    return SqlError("expression nested too deeply (a chain of thousands of operators reached "
                    f"the recursion limit {RECURSION_FLOOR}; split it)", sql, dialect)


def check_nesting(tokens: list[Token], sql: str, dialect: str) -> None:
    """Raise `too_deep` when brackets, CASE ... END, runs of prefix operators (NOT NOT x,
    - - x) and chains of subscripts (x[1][2]..., which sqlglot's DuckDB parser reads in
    superlinear time) nest past MAX_NESTING."""
    depth = run = chain = 0
    previous = None
    for token in tokens:
        kind = token.token_type
        if previous == TokenType.R_BRACKET:
            chain = chain + 1 if kind == TokenType.L_BRACKET else 0
        previous = kind
        if kind in PREFIX:
            run += 1
        else:
            run = 0
            if kind in OPEN:
                depth += 1
            elif kind in CLOSE and depth:
                depth -= 1
        if depth + run + chain > MAX_NESTING:
            raise too_deep(sql, dialect)


def check_json_nesting(text: str, sql: str, dialect: str | None) -> None:
    """Refuse JSON text nested past MAX_NESTING before `json.loads` recurses into it (the C
    decoder's recursion is bounded by the raised limit, not by a thread's smaller stack)."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                raise too_deep(sql, dialect)
        elif char in "]}":
            depth -= 1


@contextmanager
def deep_stack() -> Iterator[None]:
    """Run a block with a recursion limit of at least RECURSION_FLOOR, restored when the last
    thread inside such a block leaves it (unless someone else changed it meanwhile)."""
    global _users, _saved
    with _lock:
        if _users == 0 and sys.getrecursionlimit() < RECURSION_FLOOR:
            _saved = sys.getrecursionlimit()
            sys.setrecursionlimit(RECURSION_FLOOR)
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None:
                if sys.getrecursionlimit() == RECURSION_FLOOR:
                    sys.setrecursionlimit(_saved)
                _saved = None


@contextmanager
def nesting_guard(sql: str, dialect: str | None) -> Iterator[None]:
    """`deep_stack()`, and any RecursionError inside becomes a one-line error."""
    try:
        with deep_stack():
            yield
    except RecursionError:
        raise too_long_chain(sql, dialect) from None
