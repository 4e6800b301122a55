"""Runs a model's AI SQL on the executor, one model copy and one job at a time per device."""

from __future__ import annotations

from typing import Any

from dbt_common.exceptions import DbtRuntimeError


class AiRunner:
    @classmethod
    def for_credentials(cls, credentials: Any) -> AiRunner:
        return cls()

    def check_model(self) -> None:
        pass

    def run(self, sql: str, dialect: str, cursor: Any, model_name: str) -> Any:
        raise DbtRuntimeError("pending")
