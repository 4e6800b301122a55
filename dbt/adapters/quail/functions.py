"""AI functions inside DuckDB for views that earlier versions built with AI calls.

Such a view calls `quail_ai_<hash>` functions, recorded with their source SQL in
`main.quail_ai_functions`; every connection dbt opens on that database registers them again, so
the view stays readable inside dbt until its model is rebuilt (the view materialization now
builds an AI model as a table). Each call answers one DuckDB vector of rows in a batch, through
the executor's OpRunner, holding the device's lock.
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import Any

from dbt.adapters.events.logging import AdapterLogger

from quail_engine import exec as quail

logger = AdapterLogger("Quail")
REGISTRY = "main.quail_ai_functions"


def register_ai_functions(database: Any, runner: Any) -> None:
    """Register every recorded view function on `database` (the long-lived connection)."""
    try:
        rows = database.execute(f"select distinct dialect, source_sql from {REGISTRY}").fetchall()
    except Exception:  # noqa: BLE001 - no AI view was ever created in this database
        return
    for dialect, source_sql in rows:
        ops = quail.ai_ops(source_sql, dialect)
        _register(database, ((_stable_name(dialect, op), op) for op in ops), runner)


def _stable_name(dialect: str, op: Any) -> str:
    digest = hashlib.sha1(f"{dialect}\n{op.to_text()}".encode()).hexdigest()[:16]
    return f"quail_ai_{digest}"


def _register(cursor: Any, named_ops: Any, runner: Any) -> None:
    for name, op in named_ops:
        try:
            quail.create_ai_function(cursor, name, op, partial(runner.answer_rows, op))
        except Exception as exc:  # noqa: BLE001 - already registered on this database
            logger.debug(f"{name} not registered again: {exc}")
