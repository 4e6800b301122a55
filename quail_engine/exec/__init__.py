"""exec: run planned AI-SQL on DuckDB and the inference engine (session API for CLI and dbt)."""

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.session import QuailSession
from quail_engine.exec.udfs import prepare_sql, register_udfs

__all__ = ["AnswerStore", "QuailSession", "prepare_sql", "register_udfs"]
