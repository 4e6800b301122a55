"""Reading the SQL a CLI command was given: a FILE or `-e SQL`.

Files are read as UTF-8 (a byte-order mark is dropped); a file in another encoding is refused
with the file name and the byte offset of the first invalid byte, so the user can re-save it.
`-e` text arrives through the command line: bytes that were not UTF-8 there (Python keeps them
as lone surrogates) are refused the same way.
"""

from __future__ import annotations

from pathlib import Path

from quail_engine.errors import QuailError


def read_sql(file: str | None, expression: str | None) -> str:
    if isinstance(expression, list):  # argparse reads `--execute=--` as an empty list
        raise QuailError("-e/--execute got no SQL text ('--' ends the options); give the SQL "
                         "after -e or in a FILE")
    if (file is None) == (expression is None):
        raise QuailError("give exactly one of FILE or -e SQL")
    if expression is not None:
        _check_text(expression)
        return expression
    path = Path(file)
    if not path.is_file():
        raise QuailError(f"no such SQL file: {file}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise QuailError(f"cannot read SQL file {file}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise QuailError(f"SQL file {file} is not UTF-8: byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start} (line {line}); save it as UTF-8") from None


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise QuailError(f"the SQL given with -e is not UTF-8: character {exc.start} is an "
                         "undecodable byte; pass the SQL in a UTF-8 file instead") from None
