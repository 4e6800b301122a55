"""Result tables out: files (Parquet, CSV, JSON lines) and stdout (table, csv, json)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa

from quail_engine.errors import QuailError

MAX_CELL = 60


def write_file(table: pa.Table, path: str) -> None:
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    elif suffix == ".csv":
        import pyarrow.csv as pcsv

        pcsv.write_csv(table, path)
    elif suffix in (".json", ".jsonl"):
        Path(path).write_text(to_json_lines(table), encoding="utf-8")
    else:
        raise QuailError(f"--output {path!r}: expected a .parquet, .csv or .jsonl file")


def to_json_lines(table: pa.Table) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n"
                   for row in table.to_pylist())


def to_csv(table: pa.Table) -> str:
    import pyarrow.csv as pcsv

    buf = io.BytesIO()
    pcsv.write_csv(table, buf)
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
