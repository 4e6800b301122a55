"""Make files visible to DuckDB as tables: Parquet, CSV, Arrow IPC, and DuckDB databases."""

from __future__ import annotations

from pathlib import Path

from quail_engine.errors import ExecutionError

_READERS = {".parquet": "read_parquet", ".pq": "read_parquet", ".csv": "read_csv_auto",
            ".tsv": "read_csv_auto", ".json": "read_json_auto", ".jsonl": "read_json_auto"}
_ARROW = (".arrow", ".feather", ".ipc")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def register_table(con, name: str, path: str | Path) -> None:
    """`name` becomes a view (or registered Arrow table) over the file at `path`."""
    path = Path(path)
    if not path.exists():
        raise ExecutionError(f"table {name!r}: file {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix in _READERS:
        con.execute(f"CREATE OR REPLACE TEMP VIEW {_quote(name)} AS SELECT * FROM "
                    f"{_READERS[suffix]}({_literal(str(path))})")
    elif suffix in _ARROW:
        import pyarrow.ipc as ipc

        try:
            table = ipc.open_file(str(path)).read_all()
        except Exception:  # noqa: BLE001 - not the file format: try the stream format
            table = ipc.open_stream(str(path)).read_all()
        con.register(name, table)
    elif suffix in (".duckdb", ".db"):
        attach_database(con, path, only=name)
    else:
        raise ExecutionError(f"table {name!r}: cannot read {str(path)!r} (expected .parquet, "
                             f".csv, .json, .arrow/.feather or .duckdb)")


def attach_database(con, path: str | Path, only: str | None = None) -> list[str]:
    """Attach a DuckDB file read-only and expose its tables (or just `only`) by name."""
    path = Path(path)
    if not path.exists():
        raise ExecutionError(f"database {str(path)!r} does not exist")
    alias = "quail_db_" + str(abs(hash(str(path.resolve()))) % 10**8)
    attached = {r[0] for r in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    if alias not in attached:
        con.execute(f"ATTACH {_literal(str(path))} AS {alias} (READ_ONLY)")
    rows = con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ?"
                       " UNION ALL SELECT schema_name, view_name FROM duckdb_views() WHERE "
                       "database_name = ? AND NOT internal", [alias, alias]).fetchall()
    names = []
    for schema, table in rows:
        if only is not None and table != only:
            continue
        con.execute(f"CREATE OR REPLACE TEMP VIEW {_quote(table)} AS SELECT * FROM "
                    f"{alias}.{_quote(schema)}.{_quote(table)}")
        names.append(table)
    if only is not None and not names:
        raise ExecutionError(f"database {str(path)!r} has no table {only!r}")
    return names
