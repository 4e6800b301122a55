"""Make files visible to DuckDB as tables: Parquet, CSV, JSON, Arrow IPC, and DuckDB databases.

A path is one file, literally: DuckDB reads every path as a glob pattern, so `rev[12].csv` would
read rev1.csv and `a*.csv` its siblings; their `*`, `?` and `[` are escaped as `[*]`, `[?]`,
`[[]`. A pattern is read only when the user asks for one: `glob:data/*.csv`.
"""

from __future__ import annotations

import csv
import glob
from pathlib import Path

from quail_engine.errors import ExecutionError, shorten
from quail_engine.exec.user_errors import file_problem

GLOB_PREFIX = "glob:"
_GLOB_CHARS = "*?["  # what DuckDB reads as a pattern in a path
_READERS = {".parquet": "read_parquet", ".pq": "read_parquet", ".csv": "read_csv_auto",
            ".tsv": "read_csv_auto", ".json": "read_json_auto", ".jsonl": "read_json_auto"}
_ARROW = (".arrow", ".feather", ".ipc")
_DUCKDB = (".duckdb", ".db")
_EXPECTED = "expected .parquet, .csv, .tsv, .json, .jsonl, .arrow/.feather or .duckdb"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _escape_glob(path: str) -> str:
    """`path` as a DuckDB glob pattern that matches only itself."""
    return "".join(f"[{c}]" if c in _GLOB_CHARS else c for c in path)


def register_table(con, name: str, path: str | Path) -> list[str]:
    """`name` becomes a view (or registered Arrow table) over the file at `path`, or over the
    files matching the pattern after `glob:`; returns the files it reads (for `seal`)."""
    text = str(path)
    if text.startswith(GLOB_PREFIX):
        return _register_glob(con, name, text[len(GLOB_PREFIX):])
    path = Path(text)
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise ExecutionError(f"table {name!r}: file {text!r} {what}")
    suffix = path.suffix.lower()
    if suffix in _READERS:
        if path.stat().st_size == 0:
            raise ExecutionError(f"table {name!r}: cannot read {text!r}: the file is empty")
        _create_view(con, name, _READERS[suffix], _escape_glob(text), text)
        if suffix in (".csv", ".tsv"):
            _check_csv_columns(con, name, path)
    elif suffix in _ARROW:
        con.register(name, _read_arrow(name, text))
    elif suffix in _DUCKDB:
        attach_database(con, path, only=name)
    else:
        raise ExecutionError(f"table {name!r}: cannot read {text!r} ({_EXPECTED})")
    return [text]


def _register_glob(con, name: str, pattern: str) -> list[str]:
    suffix = Path(pattern).suffix.lower()
    if suffix not in _READERS:
        raise ExecutionError(f"table {name!r}: glob {pattern!r} must end in a file type DuckDB "
                             "reads in bulk (.parquet, .csv, .tsv, .json, .jsonl)")
    matches = sorted(glob.glob(pattern, recursive=True))
    if not matches:
        raise ExecutionError(f"table {name!r}: no file matches glob {pattern!r}")
    # the files matched now, each literally: a sealed connection (seal) may read these
    # alone, and DuckDB's own matching of the pattern would list their folder
    _create_view(con, name, _READERS[suffix], [_escape_glob(m) for m in matches], pattern)
    return matches


def _check_csv_columns(con, name: str, path: Path) -> None:
    """Refuse a CSV whose rows do not split like its header: DuckDB's sniffer then reads each
    line as one column named after the whole header ("id,review"), and the query would fail
    later naming a missing column instead of the file's problem."""
    columns = [r[0] for r in con.execute(f"DESCRIBE {_quote(name)}").fetchall()]
    if len(columns) != 1 or not any(d in columns[0] for d in ",\t;|"):
        return
    delimiter = next(d for d in ",\t;|" if d in columns[0])
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        rows = csv.reader(f, delimiter=delimiter)
        header = next(rows, [])
        for line, row in enumerate(rows, start=2):
            if row and len(row) != len(header):
                shown = shorten(delimiter.join(row), 80)
                raise ExecutionError(
                    f"table {name!r}: cannot read {str(path)!r}: line {line} has {len(row)} "
                    f"fields where the header has {len(header)} ({shown!r})")


def _create_view(con, name: str, reader: str, source: str | list[str], shown: str) -> None:
    files = (_literal(source) if isinstance(source, str)
             else f"[{', '.join(map(_literal, source))}]")
    try:
        con.execute(f"CREATE OR REPLACE TEMP VIEW {_quote(name)} AS SELECT * FROM "
                    f"{reader}({files})")
    except Exception as exc:  # noqa: BLE001 - DuckDB's reader errors: encoding, format, ...
        problem = file_problem(str(exc))
        reason = problem[1] if problem else str(exc).strip().splitlines()[0]
        file = problem[0] if problem and problem[0] else shown
        raise ExecutionError(f"table {name!r}: cannot read {file!r}: {reason}") from None


def _read_arrow(name: str, path: str):
    # (deferred: pyarrow, off the CLI's start: the facade imports this module)
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        return ipc.open_file(path).read_all()
    except (pa.ArrowInvalid, OSError):
        pass  # not the file format: try the stream format
    try:
        return ipc.open_stream(path).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise ExecutionError(f"table {name!r}: cannot read {path!r}: not an Arrow IPC file "
                             f"({str(exc).splitlines()[0]})") from None


def attach_database(con, path: str | Path, only: str | None = None) -> list[str]:
    """Attach a DuckDB file read-only and expose its tables (or just `only`) by name."""
    path = Path(path)
    if not path.is_file():
        raise ExecutionError(f"database {str(path)!r} does not exist")
    alias = "quail_db_" + str(abs(hash(str(path.resolve()))) % 10**8)
    attached = {r[0] for r in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    if alias not in attached:
        try:
            con.execute(f"ATTACH {_literal(str(path))} AS {alias} (READ_ONLY)")
        except Exception as exc:  # noqa: BLE001 - not a DuckDB file, newer storage version, ...
            raise ExecutionError(f"database {str(path)!r}: cannot open it: "
                                 f"{str(exc).strip().splitlines()[0]}") from None
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


def seal(con, files: list[str]) -> None:
    """From now on SQL on `con` reads only `files` (absolute or relative to the working
    folder): no other file is read or written (COPY, read_csv of another path, ATTACH),
    no extension is installed (it would reach the network), and no SET undoes this. The
    command line runs user SQL this way: a query reads what it was given; writes go through
    --output, which pyarrow writes, not DuckDB. A file whose name holds glob characters is
    read through an escaped pattern, which DuckDB matches by listing the folder above its
    first such part: that folder is then readable too."""
    resolved = {Path(f).resolve() for f in files}
    allowed = sorted(str(p) for p in resolved)
    folders = sorted({str(_listed_folder(p)) for p in resolved if _has_glob(str(p))})
    con.execute(f"SET allowed_paths = [{', '.join(map(_literal, allowed))}]")
    if folders:
        con.execute(f"SET allowed_directories = [{', '.join(map(_literal, folders))}]")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _has_glob(text: str) -> bool:
    return any(c in text for c in _GLOB_CHARS)


def _listed_folder(path: Path) -> Path:
    """The folder DuckDB lists to match `path` escaped: the one above its first part that
    holds a glob character."""
    folder = Path(path.anchor)
    for part in path.parts[1:]:
        if _has_glob(part):
            return folder
        folder = folder / part
    return folder


def land_rows(path: str | Path, statement: str, result_name: str, table) -> int:
    """Run `statement` (a CREATE TABLE ... AS / INSERT INTO ... reading `result_name`) on the
    DuckDB file `path` with the Arrow `table` as `result_name`, in one transaction: it lands
    whole or not at all (a failed statement leaves the file as it was). Returns the rows."""
    import duckdb  # (deferred: off the CLI's start, as pyarrow above)

    from quail_engine.exec.json_columns import landing_select  # (pyarrow)

    try:
        con = duckdb.connect(str(path))
    except duckdb.Error as exc:
        raise ExecutionError(f"database {str(path)!r}: cannot open it for writing: "
                             f"{str(exc).strip().splitlines()[0]}") from None
    try:
        landing = landing_select(table, f"{result_name}_rows")
        if landing is None:
            con.register(result_name, table)
        else:  # JSON columns land as JSON, not as the strings Arrow carried them in
            con.register(f"{result_name}_rows", table)
            con.execute(f"CREATE TEMP VIEW {result_name} AS {landing}")
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(statement)
            con.execute("COMMIT")
        except duckdb.Error as exc:
            con.execute("ROLLBACK")
            raise ExecutionError(f"database {str(path)!r}: the rows were not written "
                                 f"({str(exc).strip().splitlines()[0]}); the database is "
                                 "unchanged") from None
    finally:
        con.close()
    return table.num_rows
