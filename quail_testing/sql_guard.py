"""A guard for tests of "one representation": SQL text only our own code writes is never parsed
again, however a module imported sqlglot's parser."""

from __future__ import annotations

import re

from sqlglot.parser import Parser

# what only our own SQL text holds: an AI call's placeholder (`quail_ai_<id>`, transpile's
# `QUAILOP<id>X`) or a scan's binding column (`b_<op>_<i>`)
OURS = re.compile(r"quail_ai_\d|QUAILOP|\bb_\d+_\d+\b", re.IGNORECASE)


def refuse_our_text(monkeypatch) -> None:
    """Make every sqlglot parser fail a test that hands it text matching OURS."""
    for name in ("parse", "parse_into"):
        method = getattr(Parser, name)

        def guarded(self, *args, _method=method, **kwargs):
            sql = kwargs.get("sql", args[-1] if args and isinstance(args[-1], str) else "")
            assert not OURS.search(sql or ""), f"our SQL text parsed again: {sql}"
            return _method(self, *args, **kwargs)
        monkeypatch.setattr(Parser, name, guarded)
