"""Result column names for unaliased AI expressions. Lowering replaces an AI call by its
placeholder (`quail_ai_<id>(...)`), so DuckDB would name such a column after the placeholder:
a name with a per-query hash that no later SQL (a dbt model reading a CTAS table, a test) can
refer to. The vendors name an unaliased column after the expression as written, so a projection
that holds an AI call and has no alias gets the user's own text as its alias."""

from __future__ import annotations

from sqlglot import exp

from quail_engine.sql.placeholder import op_id_of


def unaliased_projections(tree: exp.Expr, dialect: str) -> list[tuple[exp.Select, int, str]]:
    """(select, position, text) of every projection without an alias that DuckDB would name
    after its expression (columns and stars keep their own names), read before lowering."""
    found = []
    for select in tree.find_all(exp.Select):
        for i, p in enumerate(select.expressions):
            if not isinstance(p, exp.Alias | exp.Star | exp.Column):
                found.append((select, i, p.sql(dialect=dialect)))
    return found


def name_ai_columns(projections: list[tuple[exp.Select, int, str]]) -> None:
    """Alias each projection of `projections` that now holds a placeholder with its text from
    before lowering (lowering replaces nodes in place, so the select and position still hold)."""
    for select, i, text in projections:
        if i >= len(select.expressions):
            continue
        p = select.expressions[i]
        if isinstance(p, exp.Alias):
            continue
        if any(op_id_of(n) is not None for n in p.walk()):
            p.replace(exp.alias_(p.copy(), text, quoted=True))
