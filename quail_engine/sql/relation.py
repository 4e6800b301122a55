"""`Relation`: one input of a core (sql/cores.py), its pushed-down scan built by sql/scan.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from quail_engine.sql.placeholder import placeholder_id, placeholder_ids


@dataclass(frozen=True)
class Relation:
    """One input of a core. `scan` is a complete DuckDB query (a sqlglot tree built from the
    statement's nodes, sql/scan.py) returning this relation's candidate rows after the
    relational conjuncts that touch only it, with exactly `columns`: `b_<op>_<i>` (binding i
    of op) and `k_<n>` (side of equality conjunct n). `scan_sql` is its DuckDB text, written
    from the tree once: what DuckDB runs and explain shows. A scan that calls AI functions
    itself (a CTE's or a subquery's AI projection) is rewritten to the statement's function
    names from the tree (`exec.udfs.prepare_scan`), never from the text. `scan` is None in a
    relation built by hand (tests), which has its text alone."""

    alias: str
    scan_sql: str
    columns: tuple[str, ...]
    scan: exp.Select | None = field(default=None, compare=False, repr=False,
                                    metadata={"tree": True})

    def calls(self) -> frozenset[int]:
        """The op ids of the AI calls the scan makes itself, read off its tree (off the text
        of a relation built by hand)."""
        if self.scan is None:
            return frozenset(placeholder_ids(self.scan_sql))
        return frozenset(i for n in self.scan.find_all(exp.Anonymous)
                         if (i := placeholder_id(n.name)) is not None)
