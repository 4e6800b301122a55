"""`CREATE TABLE ... AS <query>` and `INSERT INTO ... <query>`: a query plus where its rows go.

The query runs like any other (planned, AI calls batched); its rows then land in one DuckDB
transaction by the statement as written, its query replaced by the rows (`Write.statement`
reads them from the registered result `RESULT`): CREATE, CREATE OR REPLACE, IF NOT EXISTS,
INSERT with a column list all keep their meaning, and a failure anywhere leaves the table as
it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokens import TokenType

from quail_engine.sql import dialects
from quail_engine.sql.query import read_tree

RESULT = "__quail_result"


@dataclass(frozen=True)
class Write:
    query: str       # the statement's query, in the statement's dialect
    statement: str   # DuckDB SQL landing the rows of RESULT where the statement says
    target: str      # the table, as written
    verb: str        # what the statement does to it, for messages
    kind: str        # the statement's kind as users name it


def split_write(sql: str, dialect: str) -> Write | None:
    """The write statement `sql` as a query and a landing, or None when it is not one."""
    tree = read_tree(sql, dialect)
    if isinstance(tree, exp.Create) and (tree.args.get("kind") or "").upper() == "TABLE":
        verb = "created"
    elif isinstance(tree, exp.Insert):
        verb = "inserted into"
    else:
        return None
    query = tree.expression
    if not isinstance(query, exp.Query):
        return None
    target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
    shell = tree.copy()
    shell.set("expression", exp.select("*").from_(RESULT))
    kind = "CREATE TABLE ... AS" if verb == "created" else "INSERT INTO ..."
    return Write(query=_query_text(sql, dialect, verb), statement=shell.sql(dialect="duckdb"),
                 target=target.sql(dialect="duckdb"), verb=verb, kind=kind)


def _query_text(sql: str, dialect: str, verb: str) -> str:
    """The query part of `sql` as the user wrote it (written again by sqlglot, a vendor's
    JSON path can come back in a spelling the front end reads differently): after CREATE's
    top-level AS, or from INSERT's first top-level SELECT / WITH / VALUES."""
    tokens = dialects.sqlglot_dialect(dialect)().tokenize(sql)
    depth = 0
    for k, token in enumerate(tokens):
        kind = token.token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and verb == "created" and kind == TokenType.ALIAS:
            return sql[tokens[k + 1].start:].strip().rstrip(";")
        elif depth == 0 and verb != "created" and kind in QUERY_STARTS:
            return sql[token.start:].strip().rstrip(";")
    raise ValueError(f"no query found in {sql!r}")


QUERY_STARTS = (TokenType.SELECT, TokenType.WITH, TokenType.VALUES)
