"""Connections: dbt-duckdb's, with its process-wide environment kept on the base class.

dbt-duckdb reads its environment as `DuckDBConnectionManager._ENV` (python models,
store_relation, get_binding_char, source plugins). Its classmethods assign `cls._ENV`, which
on a subclass would create a second, private slot that those readers never see. Every method
that assigns `_ENV` is therefore delegated to the base class, and the subclass only reads it.
"""

from __future__ import annotations

from dbt.adapters.contracts.connection import Connection
from dbt.adapters.duckdb.connections import DuckDBConnectionManager
from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.quail.functions import register_ai_functions

logger = AdapterLogger("Quail")


class QuailConnectionManager(DuckDBConnectionManager):
    TYPE = "quail"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        connection = DuckDBConnectionManager.open(connection)
        if connection.handle is not None:
            register_ai_functions(connection.handle.cursor(), connection.credentials)
        return connection

    @classmethod
    def close_all_connections(cls) -> None:
        DuckDBConnectionManager.close_all_connections()
