"""exec: run planned AI-SQL on DuckDB and the inference engine.

Callers above exec (the CLI, the dbt adapter) use the names below (facade.py); the other
modules are the executor's own.
"""

from quail_engine.exec.facade import (
    ExecutionError,
    MissingTableError,
    ModelError,
    QuailError,
    RowAnswers,
    SessionConfig,
    SqlError,
    ai_ops,
    connect,
    create_ai_function,
    decoder_of,
    default_cache_dir,
    describe_model,
    ensure_converted,
    has_ai_calls,
    load_engine,
    model_text,
    open_session,
    resolve_device,
    result_select,
    route_stages,
    split_write,
    to_duckdb_sql,
    with_dialect_hint,
    write_rows,
)

__all__ = [
    "ExecutionError", "ai_ops", "create_ai_function", "decoder_of", "MissingTableError", "ModelError", "QuailError", "RowAnswers",
    "SessionConfig", "SqlError", "connect", "default_cache_dir", "describe_model", "ensure_converted",
    "has_ai_calls", "load_engine", "model_text", "open_session", "resolve_device",
    "result_select", "route_stages", "split_write", "to_duckdb_sql", "with_dialect_hint", "write_rows",
]
