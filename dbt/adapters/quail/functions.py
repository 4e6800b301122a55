"""AI functions inside DuckDB, for the paths dbt runs straight on DuckDB (views, `dbt show`,
unit tests, `dbt test`). PENDING: wired to quail_engine.exec once its UDF registration lands."""

from __future__ import annotations

from typing import Any

from dbt.adapters.events.logging import AdapterLogger

logger = AdapterLogger("Quail")


def register_ai_functions(cursor: Any, credentials: Any) -> None:
    logger.debug("in-DuckDB AI functions are not registered yet (quail_engine.exec pending)")
