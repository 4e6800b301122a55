"""Guards for tests of "one representation": SQL text only our own code writes is never parsed
again, however a module imported sqlglot's parser."""

from __future__ import annotations

import re

from sqlglot.generator import Generator
from sqlglot.parser import Parser

# what only our own SQL text holds: an AI call's placeholder (`quail_ai_<id>`, transpile's
# `QUAILOP<id>X`), a scan's binding column (`b_<op>_<i>`) or equality key column (`k_<n>`)
OURS = re.compile(r"quail_ai_\d|QUAILOP|\bb_\d+_\d+\b|\bk_\d+\b", re.IGNORECASE)
# pieces shorter than this (`VARCHAR`, `x = 1`) are spellings code names as constants as often
# as text it wrote
MIN_WRITTEN = 12


class WrittenText:
    """The SQL texts sqlglot's generators wrote (whatever our code wrote from a tree: DuckDB
    SQL, a vendor spelling kept for a round trip, a conjunct's display text), and which text
    handed to a parser is one of them, or a piece of one: `TYPE OBJECT(...)` read back without
    its keyword. Not refused: a piece inside a string literal of the written text (the user's
    own text a literal carries, like a DDL type in `returnType => '...'`), a text first parsed
    before it was written (the user's statement, read again in another dialect), and what
    sqlglot parses for itself while it writes."""

    def __init__(self) -> None:
        self.written: list[str] = []
        self.inputs: set[str] = set()
        self.writing = 0

    def record(self, generate):
        def recorded(generator, *args, **kwargs):
            self.writing += 1
            try:
                text = generate(generator, *args, **kwargs)
            finally:
                self.writing -= 1
            if not self.writing:
                self.written.append(text)
            return text
        return recorded

    def why(self, sql: str) -> str | None:
        """Why parsing `sql` reads our own text again, or None."""
        if OURS.search(sql):
            return "our SQL text parsed again"
        piece = sql.strip()
        if self.writing or piece in self.inputs:
            return None
        if len(piece) >= MIN_WRITTEN and any(_outside_literals(piece, t) for t in self.written):
            return "SQL text written from a tree parsed again"
        self.inputs.add(piece)
        return None


def _outside_literals(piece: str, text: str) -> bool:
    """Whether `piece` occurs in `text` outside its single-quoted literals ('' escapes keep the
    count of quotes even)."""
    start = text.find(piece)
    while start >= 0:
        if text.count("'", 0, start) % 2 == 0:
            return True
        start = text.find(piece, start + 1)
    return False


def _guard_parsers(monkeypatch, refused) -> None:
    """Make every sqlglot parser fail a test when `refused(sql)` names why."""
    for name in ("parse", "parse_into"):
        method = getattr(Parser, name)

        def guarded(self, *args, _method=method, **kwargs):
            sql = kwargs.get("sql", args[-1] if args and isinstance(args[-1], str) else "")
            why = refused(sql or "")
            assert why is None, f"{why}: {sql}"
            return _method(self, *args, **kwargs)
        monkeypatch.setattr(Parser, name, guarded)


def refuse_our_text(monkeypatch) -> None:
    """Make every sqlglot parser fail a test that hands it text matching OURS."""
    _guard_parsers(monkeypatch, lambda sql: "our SQL text parsed again" if OURS.search(sql)
                   else None)


def refuse_written_text(monkeypatch) -> WrittenText:
    """Record every SQL text a sqlglot generator writes from now on and make every parser fail
    a test that hands it one of them (`WrittenText.why`); OURS is refused as by
    `refuse_our_text`. Returned for a test to check what was written."""
    seen = WrittenText()
    monkeypatch.setattr(Generator, "generate", seen.record(Generator.generate))
    _guard_parsers(monkeypatch, seen.why)
    return seen
