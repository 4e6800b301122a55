"""AI functions inside DuckDB for views that earlier versions built with AI calls.

Such a view calls `quail_ai_<hash>` functions, recorded with their source SQL in
`main.quail_ai_functions`; every connection dbt opens on that database registers them again, so
the view stays readable inside dbt until its model is rebuilt (the view materialization now
builds an AI model as a table). Each call answers one DuckDB vector of rows in a batch, through
the executor's OpRunner, holding the device's lock.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

from dbt.adapters.events.logging import AdapterLogger

logger = AdapterLogger("Quail")
REGISTRY = "main.quail_ai_functions"


def register_ai_functions(database: Any, runner: Any) -> None:
    """Register every recorded view function on `database` (the long-lived connection)."""
    try:
        rows = database.execute(f"select distinct dialect, source_sql from {REGISTRY}").fetchall()
    except Exception:  # noqa: BLE001 - no AI view was ever created in this database
        return
    from quail_engine.sql.query import parse

    for dialect, source_sql in rows:
        ops = parse(source_sql, dialect).ai_ops
        _register(database, ((_stable_name(dialect, op), op) for op in ops), runner)


def _stable_name(dialect: str, op: Any) -> str:
    digest = hashlib.sha1(f"{dialect}\n{op.to_text()}".encode()).hexdigest()[:16]
    return f"quail_ai_{digest}"


def _register(cursor: Any, named_ops: Any, runner: Any) -> None:
    from quail_engine.exec.udfs import sql_type

    for name, op in named_ops:
        try:
            cursor.create_function(name, _vector_function(op, runner),
                                   ["VARCHAR"] * len(op.bindings), sql_type(op), type="arrow",
                                   side_effects=False)
        except Exception as exc:  # noqa: BLE001 - already registered on this database
            logger.debug(f"{name} not registered again: {exc}")


def _vector_function(op: Any, runner: Any) -> Any:
    import pyarrow as pa

    from quail_engine.exec.udfs import sql_type

    arrow_type = {"BOOLEAN": pa.bool_(), "DOUBLE": pa.float64(), "FLOAT": pa.float64(),
                  "VARCHAR[]": pa.list_(pa.string()), "BIGINT": pa.int64(),
                  "INTEGER": pa.int64()}.get(sql_type(op), pa.string())

    def answer_vector(*arrays: Any) -> Any:
        rows = list(zip(*(a.to_pylist() for a in arrays)))
        unique = list(dict.fromkeys(rows))
        answers = dict(zip(unique, runner.answer_rows(op, unique)))
        return pa.array([answers[r] for r in rows], type=arrow_type)

    # duckdb counts the function's parameters: give it one per binding (a bare *arrays has none)
    answer_vector.__signature__ = inspect.Signature(
        [inspect.Parameter(f"b{i}", inspect.Parameter.POSITIONAL_ONLY)
         for i in range(len(op.bindings))])
    return answer_vector
