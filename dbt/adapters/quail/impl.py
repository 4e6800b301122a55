"""The quail adapter: dbt-duckdb, plus the one hook where a model's SQL meets the AI engine.

Every SQL materialization dbt-duckdb ships (table, incremental with any strategy, external)
writes its rows through `create_table_as`. Our `quail__create_table_as` macro asks
`adapter.quail_model_sql` for the SELECT to put there: unchanged for plain DuckDB SQL, the
DuckDB transpilation for plain warehouse SQL, and for SQL with AI functions a scan of the Arrow
result the executor computed before any DDL runs (its JSON columns cast back to JSON: Arrow
carries them as strings). So a run killed during inference has written nothing, and
dbt-duckdb's swap-and-commit does the rest exactly as for any other model.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any

from dbt.adapters.base.meta import available
from dbt.adapters.duckdb.impl import DuckDBAdapter, DuckDBConfig
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.quail import ai_runs
from dbt.adapters.quail.ai_runner import AiRunner
from dbt.adapters.quail.cancel import cancel_event
from dbt.adapters.quail.connections import QuailConnectionManager
from dbt.adapters.quail.credentials import check_dialect
from dbt.adapters.quail.run_summary import work_fields
from dbt.adapters.quail.sql_routing import has_ai_functions, to_duckdb
from quail_engine import exec as quail

logger = AdapterLogger("Quail")
_RESULT_IDS = itertools.count()


@dataclass
class QuailConfig(DuckDBConfig):
    quail_dialect: str | None = None


class QuailAdapter(DuckDBAdapter):
    ConnectionManager = QuailConnectionManager
    AdapterSpecificConfigs = QuailConfig

    def __init__(self, config: Any, mp_context: Any) -> None:
        super().__init__(config, mp_context)
        self._results: dict[int, list[tuple[Any, str]]] = {}

    def pre_model_hook(self, config: Any) -> Any:
        self.connections.note_ai_work(None)
        return super().pre_model_hook(config)

    def post_model_hook(self, config: Any, context: Any) -> None:
        try:
            self.connections.note_ai_work(None)
            for cursor, name in self._results.pop(threading.get_ident(), []):
                cursor.unregister(name)
        finally:
            super().post_model_hook(config, context)

    def debug_query(self) -> None:
        super().debug_query()
        AiRunner.for_credentials(self.config.credentials).check_model()

    @available
    def quail_dialect(self, configured: Any = None) -> str:
        """The model's source dialect: its `quail_dialect` config, else the profile's."""
        if configured is None or configured == "":
            return self.config.credentials.dialect
        return check_dialect(configured, "config 'quail_dialect'")

    @available
    def quail_model_sql(self, compiled_code: str, dialect: str | None = None,
                        model_name: str | None = None, translate: bool = True,
                        relation: Any = None) -> str:
        """The DuckDB SELECT whose rows the model materializes (see module docstring).
        `translate=False` leaves SQL without AI calls as it is (dbt's own test SQL).
        `relation`: the model's table, whose AI work is recorded for the docs (ai_runs.py)."""
        dialect = self.quail_dialect(dialect)
        if not has_ai_functions(compiled_code):
            return to_duckdb(compiled_code, dialect) if translate else compiled_code
        connection = self.connections.get_thread_connection()
        cursor = self._raw_cursor(connection)
        runner = AiRunner.for_credentials(self.config.credentials)
        table, report = runner.run(compiled_code, dialect, cursor, model_name or "<model>",
                                   cancel_event(connection))
        work = work_fields(report.to_json(), table.num_rows)
        self.connections.note_ai_work(work)
        if relation is not None and relation.database:
            ai_runs.record(self.connections, cursor, relation, model_name or "", work)
        name = f"__quail_result_{next(_RESULT_IDS)}"
        cursor.register(name, table)
        self._results.setdefault(threading.get_ident(), []).append((cursor, name))
        return quail.result_select(table, f'"{name}"')

    @available
    def quail_ai_runs_table(self, database: str) -> str | None:
        """The table of `database` holding its AI models' last runs (ai_runs.py), if any."""
        found = self.connections.add_query(
            "select 1 from duckdb_tables() where database_name = ? and schema_name = 'main' "
            "and table_name = ?", auto_begin=False,
            bindings=[database, ai_runs.RUNS_TABLE])[1].fetchall()
        return ai_runs.runs_table(database) if found else None

    @available
    def quail_is_ai_sql(self, sql: str, dialect: str | None = None) -> bool:
        """True when `sql` (in the model's dialect) calls AI functions: the view
        materialization builds such a model as a table."""
        if not has_ai_functions(sql):
            return False
        try:
            return quail.has_ai_calls(sql, self.quail_dialect(dialect))
        except quail.QuailError:
            return True  # AI-looking SQL that does not parse: the table path reports why

    @available
    def quail_view_sql(self, sql: str, dialect: str | None = None) -> str:
        """A view's body in DuckDB SQL. AI calls are refused: the view materialization builds
        an AI model as a table, and a view reaching here by another road would fail for every
        reader outside dbt."""
        dialect = self.quail_dialect(dialect)
        if has_ai_functions(sql) and self.quail_is_ai_sql(sql, dialect):
            raise DbtRuntimeError("a view cannot call AI functions: readers outside dbt could "
                                  "not evaluate them; materialize it as a table")
        return to_duckdb(sql, dialect)

    def _raw_cursor(self, connection: Any) -> Any:
        cursor = connection.handle.cursor()
        raw = getattr(cursor, "_cursor", cursor)
        if not hasattr(raw, "register"):
            raise DbtRuntimeError(
                "AI models need a local DuckDB connection (remote/buenavista is not supported)")
        return raw
