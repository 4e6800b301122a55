"""One module per dialect: a sqlglot subclass, `FUNCTIONS` (vendor name -> IR builder, filled
from quail_engine.sql.functions), `lookup`, `is_ai_name` and `unwrap` (result wrappers)."""

from __future__ import annotations

import importlib
from types import ModuleType

from quail_engine.errors import SqlError
from quail_engine.settings import DIALECTS

__all__ = ["DIALECTS", "get", "sqlglot_dialect"]


def get(name: str) -> ModuleType:
    """The dialect module for `name` (case-insensitive), its `FUNCTIONS` filled: each kind's
    vendor spellings live in quail_engine.sql.functions, which fills the tables when imported."""
    key = (name or "").lower()
    if key not in DIALECTS:
        raise SqlError(f"unknown dialect {name!r}; expected one of {', '.join(DIALECTS)}")
    importlib.import_module("quail_engine.sql.functions")
    return importlib.import_module(f"quail_engine.sql.dialects.{key}")


def sqlglot_dialect(name: str):
    module = get(name)
    return next(v for k, v in vars(module).items() if k.startswith("Quail") and isinstance(v, type))
