"""Where a statement's LIMIT binds a core's steps (PhysicalPlan.limit) and where the core's
projections run (PhysicalPlan.projections_at).

The statement is rewritten so its LIMIT applies below the AI calls (exec/limit_pushdown.py);
the executor can use it only where the statement's rows are one core's filtered rows: a
statement of one core, over one relation, with no AI join. There, without ORDER BY, DuckDB keeps
the scan's order, so the first `rows` rows that pass the filters are the statement's and the
filters stop once they have found them (the projections then ask those rows alone); with one,
every filter runs and the projections are left to the rows DuckDB keeps (answered on the fly).
"""

from __future__ import annotations

from dataclasses import dataclass

# where the core's projections run (PhysicalPlan.projections_at)
PROJECT_WITH_FILTERS = "filters"  # in each filter chunk, the documents resident
PROJECT_LIMITED = "limit"         # after the filters, over the first LIMIT rows that pass
PROJECT_AFTER_JOINS = "joins"     # over the rows the joins keep, after them
PROJECT_STATEMENT = "statement"   # left to DuckDB's statement (answered on the fly)


@dataclass(frozen=True)
class RowLimit:
    """`rows`: the LIMIT's literal; `is_ordered`: the statement orders its rows first."""

    rows: int
    is_ordered: bool

    @property
    def stops_filters(self) -> bool:
        """Whether the filters stop once `rows` rows pass (the statement's first rows then)."""
        return not self.is_ordered

    def text(self) -> str:
        if self.stops_filters:
            return (f"limit {self.rows}: the filters stop once {self.rows} rows pass; "
                    f"projections over those rows")
        return (f"limit {self.rows} ordered: every filter runs; projections left to the "
                f"statement's {self.rows} rows")


def core_limit(limit: RowLimit | None, num_cores: int, num_relations: int,
               has_joins: bool) -> RowLimit | None:
    """The statement's `limit` where it binds the core's steps: a statement of one core over one
    relation without AI joins (else the core's rows are not the statement's). Example: `SELECT
    ai_generate(...) FROM t WHERE ai_filter(...) LIMIT 5` -> RowLimit(5, False)."""
    if limit is None or num_cores != 1 or num_relations != 1 or has_joins:
        return None
    return limit


def projections_at(limit: RowLimit | None, has_joins: bool, outer_free: bool) -> str:
    """Where the projections run (PROJECT_*): over the joined rows after the joins when every
    AI join is inner (else the statement asks them: an outer join keeps rows no pair passes
    for); without joins, with the filters' chunks, or as the core's LIMIT says."""
    if has_joins:
        return PROJECT_AFTER_JOINS if outer_free else PROJECT_STATEMENT
    if limit is None:
        return PROJECT_WITH_FILTERS
    return PROJECT_LIMITED if limit.stops_filters else PROJECT_STATEMENT
