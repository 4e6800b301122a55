"""A result's JSON columns through Arrow.

DuckDB hands a JSON column (an AI call's object, PARSE_JSON, a STRUCT holding one) to Arrow as
plain strings, so rows landed again from that Arrow table (`CREATE TABLE ... AS` through
`quail query --database`, exec/tables.land_rows; a dbt model's table, facade.result_select)
became VARCHAR where the SELECT itself returns JSON. `statement_arrow` notes each such column's DuckDB type in its Arrow field's metadata (the
values, and every reader of the table, are unchanged); `landing_select` casts them back.
"""

from __future__ import annotations

import pyarrow as pa

from quail_engine.exec.scans import fetch_arrow, query_arrow

DUCKDB_TYPE = b"quail.duckdb_type"


def statement_arrow(con, sql: str):
    """Run `sql`; the Arrow table with each column whose DuckDB type holds JSON noted."""
    if not hasattr(con, "sql"):
        return query_arrow(con, sql)
    relation = con.sql(sql)
    types = [str(t) for t in relation.types]
    table = fetch_arrow(relation)
    if not any("JSON" in t for t in types):
        return table
    fields = [f.with_metadata({**(f.metadata or {}), DUCKDB_TYPE: t.encode()})
              if "JSON" in t else f for f, t in zip(table.schema, types)]
    return pa.Table.from_arrays(table.columns, schema=pa.schema(fields, table.schema.metadata))


def landing_select(table, source: str) -> str | None:
    """`SELECT` of the Arrow `table` registered as `source` with its noted columns cast back to
    their DuckDB types; None when it has none."""
    casts = []
    for f in table.schema:
        noted = (f.metadata or {}).get(DUCKDB_TYPE)
        if noted is not None:
            name = '"' + f.name.replace('"', '""') + '"'
            casts.append(f"CAST({name} AS {noted.decode()}) AS {name}")
    if not casts:
        return None
    return f"SELECT * REPLACE ({', '.join(casts)}) FROM {source}"
