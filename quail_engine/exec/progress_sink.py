"""What the executor tells a progress display, and the display it uses when it has none.

The display itself (a live bar on a terminal, plain lines in a log) is the caller's:
quail_engine/cli/progress.py for the CLI; the dbt adapter shows none. The executor calls, from
any thread: `stage(text)`, `op_start(label, total_rows, total_tokens=None)`, `advance(rows,
tokens_total)`, `op_done()`, `set_token_counter(fn)` and `close()` (cli/progress.py documents
each); a display never raises into the query.
"""

from __future__ import annotations

from collections.abc import Callable


class NullProgress:
    """No display: every call does nothing."""

    enabled = False

    def stage(self, text: str) -> None:
        pass

    def op_start(self, label: str, total_rows: int, total_tokens: int | None = None) -> None:
        pass

    def advance(self, rows: int, tokens_total: int) -> None:
        pass

    def op_done(self) -> None:
        pass

    def set_token_counter(self, counter: Callable[[], int] | None) -> None:
        pass

    def close(self) -> None:
        pass
