"""The relations a SELECT reads: alias -> source node (FROM and JOINs, in order)."""

from __future__ import annotations

from sqlglot import exp


def alias_of(source: exp.Expr) -> str:
    if isinstance(source, exp.Table | exp.Subquery) or source.alias:
        return source.alias_or_name
    return source.sql()


def sources_of(select: exp.Select) -> dict[str, exp.Expr]:
    out: dict[str, exp.Expr] = {}
    from_ = select.args.get("from_")
    if from_ is not None:
        out[alias_of(from_.this)] = from_.this
    for join in select.args.get("joins") or ():
        out[alias_of(join.this)] = join.this
    return out


def join_of(select: exp.Select, alias: str) -> exp.Join | None:
    """The JOIN that brings in `alias` (None for the FROM relation)."""
    for join in select.args.get("joins") or ():
        if alias_of(join.this) == alias:
            return join
    return None


def is_inner(join: exp.Join | None) -> bool:
    """FROM, comma, CROSS and INNER joins (not outer, semi, anti, ASOF ...)."""
    if join is None:
        return True
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    return not side and kind in ("", "INNER", "CROSS")
