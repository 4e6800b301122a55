"""`quail explain --analyze --plot FILE.html|FILE.png`: the run's timeline as a picture.

The picture is drawn from the report's JSON (exec/report.py, its `timeline`; exec/timeline.py
says what is recorded), so a saved `--report` file draws the same: phases and operator calls as
bars on a time axis, each engine batch (its forward passes and tokens), fresh tokens per second,
the KV arena's resident bytes, and each operator's cache hits. HTML is one self-contained file
(inline SVG, no script, nothing fetched); PNG needs matplotlib (`pip install 'dbt-quail[plot]'`).
The file is written whole or not at all (cli/output.replacing).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from quail_engine.cli.chart import chart_of
from quail_engine.cli.output import check_writable, replacing
from quail_engine.cli.plot_html import render_html
from quail_engine.errors import QuailError

SUFFIXES = {".html": "html", ".htm": "html", ".png": "png"}
MATPLOTLIB_MISSING = ("--plot {path!r}: a PNG needs matplotlib: pip install 'dbt-quail[plot]' "
                      "(or write a .html file, which needs nothing)")


def check_plot(args: argparse.Namespace) -> str | None:
    """The format of `--plot` ('html' or 'png'), after refusing it without --analyze, with
    another suffix, at an unwritable path, or as PNG without matplotlib; None without --plot.
    Called before the query runs, so a bad --plot costs nothing."""
    path = getattr(args, "plot", None)
    if not path:
        return None
    if not getattr(args, "analyze", False):
        raise QuailError("--plot draws a real run: add --analyze")
    fmt = SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        raise QuailError(f"--plot {path!r}: expected a .html or .png file")
    check_writable(path, "--plot")
    if fmt == "png":
        _require_matplotlib(path)
    return fmt


def write_plot(report: dict, path: str) -> None:
    """Draw `report` (Report.to_json()) into `path`, HTML or PNG by its suffix."""
    fmt = SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        raise QuailError(f"--plot {path!r}: expected a .html or .png file")
    chart = chart_of(report)
    try:
        if fmt == "html":
            text = render_html(chart, report)
            with replacing(path) as temp:
                Path(temp).write_text(text, encoding="utf-8")
        else:
            _require_matplotlib(path)
            from quail_engine.cli.plot_png import render_png  # matplotlib, an optional extra

            with replacing(path) as temp:
                render_png(chart, temp)
    except OSError as exc:
        raise QuailError(f"--plot {path!r}: cannot write it: {exc.strerror or exc}") from None


def _require_matplotlib(path: str) -> None:
    try:
        import matplotlib  # noqa: F401  (an optional extra: checked before anything is drawn)
    except ImportError:
        raise QuailError(MATPLOTLIB_MISSING.format(path=path)) from None
