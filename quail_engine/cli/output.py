"""Result tables out: files (Parquet, CSV, JSON lines) and stdout (table, csv, json).

A file is written whole or not at all: the bytes go to a hidden temporary file in the target's
folder, which is renamed over the target only once complete (a rename within one folder is
atomic), so a run killed mid-write leaves the previous file as it was. `check_output` and
`check_writable` let a command refuse a bad path before it computes anything.
"""

from __future__ import annotations

import io
import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from quail_engine.errors import QuailError

MAX_CELL = 60
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".json": "jsonl",
           ".jsonl": "jsonl"}
_JSON_BATCH_ROWS = 10_000


def check_output(path: str, what: str = "--output") -> str:
    """The file format for `path` ('parquet', 'csv' or 'jsonl'), after checking that it can be
    written; a QuailError naming `what` otherwise."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise QuailError(f"{what} {path!r}: expected a .parquet, .csv or .jsonl file")
    check_writable(path, what)
    return fmt


def check_writable(path: str, what: str) -> None:
    """A QuailError naming `what` unless a file can be written at `path`."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise QuailError(f"{what} {path!r} is a folder; give a file name")
    if not folder.is_dir():
        raise QuailError(f"{what} {path!r}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise QuailError(f"{what} {path!r}: folder {str(folder)!r} is not writable")


@contextmanager
def replacing(path: str | Path) -> Iterator[str]:
    """Yields a temporary path beside `path`; when the block completes, it replaces `path`.
    If the block fails, `path` is untouched and the temporary file removed. Temporary files of
    `path` that a killed writer left behind are removed first."""
    target = Path(path)
    remove_leftovers(target)
    temp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # umask applies
    try:
        yield str(temp)
        with open(temp, "rb+") as done:
            os.fsync(done.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def remove_leftovers(target: Path) -> None:
    """Remove `target`'s temporary files whose writer is gone: a SIGKILL skips `replacing`'s
    cleanup. A temporary file names its writer's process id; one of a live process (another
    run writing the same file now) is left alone. Files of the form before the id was named
    (`.<name>.<8 hex>.tmp`) are leftovers too."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(?:(\d+)\.)?[0-9a-f]{{8}}\.tmp")
    try:
        names = [p.name for p in target.parent.iterdir()]
    except OSError:
        return
    for name in names:
        found = pattern.fullmatch(name)
        if found and not (found.group(1) and _alive(int(found.group(1)))):
            (target.parent / name).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or not a process id we can ask about
    return True


def unique_names(table: pa.Table) -> pa.Table:
    """`table` with repeated column names made unique as DuckDB names a table's or a COPY's
    columns (`SELECT r.id, t.id`: id, id_1; compared without case, a taken name gets the first
    free `_1`, `_2`, ...): a JSON row keeps one value per key, and Parquet readers refuse
    ambiguous names, so a repeated name would lose a column or the file."""
    used: set[str] = set()
    names = []
    for name in table.column_names:
        unique, k = name, 0
        while unique.lower() in used:
            k += 1
            unique = f"{name}_{k}"
        used.add(unique.lower())
        names.append(unique)
    return table if names == table.column_names else table.rename_columns(names)


def write_file(table: pa.Table, path: str) -> None:
    """Write `table` to `path` in the format its suffix names, replacing any previous file
    only once the new one is complete."""
    fmt = check_output(path)
    try:
        with replacing(path) as temp:
            _WRITERS[fmt](table, temp)
    except (pa.ArrowException, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise QuailError(f"--output {path!r}: cannot write it: {reason}") from None


def write_text(path: str, text: str) -> None:
    """Write `text` (UTF-8) to `path`, replacing any previous file only once complete."""
    with replacing(path) as temp:
        Path(temp).write_text(text, encoding="utf-8")


def _write_parquet(table: pa.Table, path: str) -> None:
    pq.write_table(table, path)


def _write_csv(table: pa.Table, path: str) -> None:
    pcsv.write_csv(csv_ready(table), path)


def csv_ready(table: pa.Table) -> pa.Table:
    """`table` with nested columns (lists, e.g. multi-label answers; structs; maps) as JSON
    text, which CSV cannot hold otherwise."""
    for i, field in enumerate(table.schema):
        if pa.types.is_nested(field.type):
            text = [None if v is None else json.dumps(v, ensure_ascii=False, default=str)
                    for v in table.column(i).to_pylist()]
            table = table.set_column(i, pa.field(field.name, pa.string()),
                                     pa.array(text, pa.string()))
    return table


def _write_jsonl(table: pa.Table, path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for batch in table.to_batches(max_chunksize=_JSON_BATCH_ROWS):
            out.write(to_json_lines(pa.Table.from_batches([batch], table.schema)))


_WRITERS: dict[str, Callable[[pa.Table, str], None]] = {
    "parquet": _write_parquet, "csv": _write_csv, "jsonl": _write_jsonl}


def to_json_lines(table: pa.Table) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n"
                   for row in table.to_pylist())


def to_csv(table: pa.Table) -> str:
    buf = io.BytesIO()
    pcsv.write_csv(csv_ready(table), buf)
    return buf.getvalue().decode("utf-8")


def _cell(value) -> str:
    text = "NULL" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…"


def to_text_table(table: pa.Table) -> str:
    names = table.column_names
    rows = [[_cell(v) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    line = "+".join("-" * (w + 2) for w in widths)
    out = [" | ".join(n.ljust(w) for n, w in zip(names, widths)), line]
    out += [" | ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def render(table: pa.Table, fmt: str) -> str:
    if fmt == "csv":
        return to_csv(table)
    if fmt == "json":
        return to_json_lines(table)
    return to_text_table(table) + "\n"
