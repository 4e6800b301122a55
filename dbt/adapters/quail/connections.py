"""Connections: dbt-duckdb's, with its process-wide environment kept on the base class.

dbt-duckdb reads its environment as `DuckDBConnectionManager._ENV` (python models,
store_relation, get_binding_char, source plugins). Its classmethods assign `cls._ENV`, which
on a subclass would create a second, private slot that those readers never see. Every method
that assigns `_ENV` is therefore delegated to the base class, and the subclass only reads it.
"""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Any

from dbt.adapters.contracts.connection import AdapterResponse, Connection
from dbt.adapters.duckdb.connections import DuckDBConnectionManager
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.quail.ai_runner import AiRunner
from dbt.adapters.quail.cancel import cancel_event, quiet_interrupt_traceback
from dbt.adapters.quail.functions import register_ai_functions
from dbt.adapters.quail.run_summary import ai_response

logger = AdapterLogger("Quail")


def database_connection() -> Any:
    """The environment's long-lived DuckDB connection (None for remote environments).

    Functions DuckDB keeps for the whole database are registered here: a function created
    on one of dbt's per-thread cursors dies with that cursor while the database still lists it,
    and the next call crashes the process."""
    env = DuckDBConnectionManager._ENV
    root = getattr(env, "conn", None)
    return root if hasattr(root, "create_function") else None


def ensure_database_folder(path: Any) -> None:
    """Create the folder of a local database file: DuckDB creates a missing file but not its
    folder, so `path: target/x.duckdb` failed on a fresh clone, before dbt made target/."""
    text = str(path or "")
    if not text or text == ":memory:" or "://" in text or text.startswith(("md:", "motherduck:")):
        return
    folder = Path(text).expanduser().parent
    if not folder.is_dir():
        logger.debug(f"creating {folder} for the database file {text}")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DbtRuntimeError(f"cannot create the folder {str(folder)!r} of the database "
                                  f"file {text!r} (profile field 'path'): {exc}") from exc


class QuailConnectionManager(DuckDBConnectionManager):
    TYPE = "quail"
    _FUNCTIONS_REGISTERED: weakref.WeakSet = weakref.WeakSet()

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        ensure_database_folder(getattr(connection.credentials, "path", None))
        connection = DuckDBConnectionManager.open(connection)
        root = database_connection()
        if connection.handle is None or root is None:
            return connection
        with cls._LOCK:
            if root not in cls._FUNCTIONS_REGISTERED:
                register_ai_functions(root, AiRunner.for_credentials(connection.credentials))
                cls._FUNCTIONS_REGISTERED.add(root)
        return connection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ai_work: dict[int, dict[str, Any]] = {}  # thread -> its model's AI work

    def note_ai_work(self, work: dict[str, Any] | None) -> None:
        """Attach `work` (run_summary.work_fields) to the responses of the statements this
        thread runs from now until the model ends (None: stop). dbt keeps the response of
        the model's `main` statement, which every materialization runs after the AI work
        (incremental and external ones in a later statement than the one reading the result),
        so it lands in run_results.json whatever the materialization."""
        if work is None:
            self._ai_work.pop(threading.get_ident(), None)
        else:
            self._ai_work[threading.get_ident()] = work

    def execute(self, sql: str, auto_begin: bool = False, fetch: bool = False,
                limit: int | None = None) -> tuple[AdapterResponse, Any]:
        response, table = super().execute(sql, auto_begin, fetch, limit)
        work = self._ai_work.get(threading.get_ident())
        return (response if work is None else ai_response(response, work)), table

    def cancel_open(self) -> list[str]:
        """dbt cancels every open connection on Ctrl-C (and on --fail-fast)."""
        quiet_interrupt_traceback()
        return super().cancel_open()

    def cancel(self, connection: Connection) -> None:
        """Stop the AI work of the model running on `connection` (at the engine's next batch;
        see cancel.py), then interrupt its DuckDB statement as dbt-duckdb does."""
        cancel_event(connection).set()
        logger.debug(f"cancelling the AI work on connection {connection.name}")
        super().cancel(connection)

    @classmethod
    def close_all_connections(cls) -> None:
        DuckDBConnectionManager.close_all_connections()
