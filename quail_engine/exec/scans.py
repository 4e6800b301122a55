"""A relation's candidate rows, scanned on DuckDB with its pushed-down predicates."""

from __future__ import annotations

from dataclasses import dataclass, field

from quail_engine.exec.user_errors import scan_error
from quail_engine.sql.ir import binding_column, is_binding_column


@dataclass
class ScanData:
    alias: str
    columns: tuple[str, ...]
    rows: list[dict]
    key_columns: frozenset[str] = field(default_factory=frozenset)

    def key(self, row: int, keys: list[str]) -> tuple:
        r = self.rows[row]
        return tuple(r[k] for k in keys)

    def key_match_fraction(self, other: ScanData, keys: list[str]) -> float:
        """Fraction of the cross product whose equality keys match (NULL keys never match)."""
        if not self.rows or not other.rows:
            return 1.0
        counts: dict[tuple, int] = {}
        for i in range(len(other.rows)):
            k = other.key(i, keys)
            if None not in k:
                counts[k] = counts.get(k, 0) + 1
        pairs = sum(counts.get(self.key(i, keys), 0) for i in range(len(self.rows)))
        return pairs / (len(self.rows) * len(other.rows))


def query_arrow(con, sql: str):
    """Run `sql` and return a pyarrow Table (relation API when the connection has it)."""
    if hasattr(con, "sql"):
        return fetch_arrow(con.sql(sql))
    return fetch_arrow(con.execute(sql))


def fetch_arrow(result):
    """The result as a pyarrow Table across duckdb versions (2.0 renamed the method)."""
    for name in ("to_arrow_table", "fetch_arrow_table"):
        if hasattr(result, name):
            return getattr(result, name)()
    table = result.arrow()
    return table.read_all() if hasattr(table, "read_all") else table


def load_scan(con, relation, prepare=None) -> ScanData:
    """Run `relation.scan_sql`; binding columns come back as VARCHAR (DuckDB's cast), the same
    text the AI functions receive inside the query. `prepare` (relation -> SQL,
    exec/udfs.prepare_scan): the SQL of a scan that itself calls AI functions (a CTE or
    subquery with an AI projection), with this statement's registered function names; they
    are answered as DuckDB reads the rows."""
    scan_sql = relation.scan_sql
    if prepare is not None and relation.calls():
        scan_sql = prepare(relation)
    try:
        probe = con.execute(f"SELECT * FROM ({scan_sql}) AS q LIMIT 0")
        columns = tuple(d[0] for d in probe.description)
        casts = ", ".join(f'CAST("{c}" AS VARCHAR) AS "{c}"' for c in columns if is_binding_column(c))
        sql = (f"SELECT * REPLACE ({casts}) FROM ({scan_sql}) AS q" if casts else scan_sql)
        table = query_arrow(con, sql)
    except Exception as exc:  # duckdb raises many types; all mean the scan cannot run
        raise scan_error(exc, relation.alias) from exc
    rows = table.to_pylist()
    keys = frozenset(c for c in columns if c.startswith("k_"))
    return ScanData(relation.alias, columns, rows, keys)


def op_values(scan: ScanData, op_id: int, op, row: int) -> tuple:
    """Binding values of `op` from one scan row (all bindings must be this scan's columns)."""
    r = scan.rows[row]
    return tuple(r[binding_column(op_id, i)] for i in range(len(op.bindings)))
