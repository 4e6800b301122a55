"""SQL front ends: warehouse dialects -> canonical IR, and transpilation between dialects.

    parse(sql, dialect) -> ParsedQuery       transpile(sql, read, write) -> str
    render_prompt(op, values) -> str         explain_json(parsed) -> dict
"""

from quail_engine.sql.explain import explain_json, explain_text
from quail_engine.sql.prompt import render_prompt
from quail_engine.sql.query import ParsedQuery, parse
from quail_engine.sql.transpile import transpile

__all__ = ["ParsedQuery", "explain_json", "explain_text", "parse", "render_prompt", "transpile"]
