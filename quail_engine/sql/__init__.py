"""SQL front ends: warehouse dialects -> canonical IR, and transpilation between dialects.

    parse(sql, dialect) -> ParsedQuery       transpile(sql, read, write) -> str
    render_prompt(op, values) -> str         explain_json(parsed) -> dict

The names load on first use (PEP 562), so `quail_engine.sql.ir`, the IR the planner reads, is
importable without sqlglot.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quail_engine.sql.explain import explain_json, explain_text
    from quail_engine.sql.prompt import render_prompt
    from quail_engine.sql.query import ParsedQuery, parse
    from quail_engine.sql.transpiler import transpile

_HOME = {"explain_json": "explain", "explain_text": "explain", "render_prompt": "prompt",
         "ParsedQuery": "query", "parse": "query", "transpile": "transpiler"}

__all__ = ["ParsedQuery", "explain_json", "explain_text", "parse", "render_prompt", "transpile"]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
