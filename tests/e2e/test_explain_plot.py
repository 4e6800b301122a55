"""`quail explain --analyze --plot` through the real CLI on the embedded default model and a tiny
table: the HTML names every operator of the plan and shows the engine's batches; a cached rerun
draws a PNG (a real image) whose report shows every prompt answered from the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data" / "reviews.csv"
SQL = ("SELECT id, ai_classify(review, ['positive', 'negative']) AS tone FROM reviews "
       "WHERE ai_filter('Is this review about a product? ' || review) ORDER BY id")


def quail(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DO_NOT_TRACK": "1"}
    return subprocess.run([sys.executable, "-c", "import sys; from quail_engine.cli import "
                           "main; sys.exit(main())", *args], capture_output=True, text=True,
                          env=env, timeout=600, stdin=subprocess.DEVNULL)


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_explain_analyze_plot_html_then_cached_png(tmp_path, require_embedded):
    require_embedded("default")
    lines = EXAMPLES.read_text().splitlines()
    (tmp_path / "reviews.csv").write_text("\n".join(lines[:7]) + "\n")  # header + 6 reviews
    args = ("explain", "-e", SQL, "--dialect", "snowflake", "--analyze", "--device", "cpu",
            "--quiet", "--table", f"reviews={tmp_path / 'reviews.csv'}",
            "--cache-dir", str(tmp_path / "cache"))

    html, report = tmp_path / "run.html", tmp_path / "run.json"
    done = quail(*args, "--plot", str(html), "--report", str(report))
    assert done.returncode == 0, done.stderr
    run = json.loads(report.read_text())
    names = [f"{o['kind']} #{o['op']}" for o in run["operators"]]
    assert {n.split(" #")[0] for n in names} == {"ai_classify", "ai_filter"}
    page = _Text()
    page.feed(html.read_text(encoding="utf-8"))
    text = " ".join(page.text)
    assert "svg" in page.tags and all(name in text for name in names)
    batches = run["timeline"]["batches"]
    assert batches and all(b["passes"] > 0 for b in batches)
    assert sum(b["fresh_tokens"] for b in batches) == run["fresh_tokens"]
    assert f"{len(batches)} engine batches" in text

    png, report2 = tmp_path / "again.png", tmp_path / "again.json"
    again = quail(*args, "--plot", str(png), "--report", str(report2))
    assert again.returncode == 0, again.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread

    assert imread(png).shape[0] > 400
    cached = json.loads(report2.read_text())
    assert cached["cache_hits"] == sum(o["prompts"] for o in cached["operators"]) > 0
    assert cached["timeline"]["batches"] == []
