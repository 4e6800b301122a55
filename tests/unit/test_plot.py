"""`explain --analyze --plot`: a recorded report drawn as HTML (self-contained, every operator
named, every engine batch with its passes and tokens) and as PNG (a real image with every
operator's name on it); a bad --plot is refused in one line, exit 2, before anything runs."""

from __future__ import annotations

import json
import sys
from html.parser import HTMLParser

import pytest

from quail_engine.cli import main
from quail_engine.cli.chart import chart_of, nice_ticks
from quail_engine.cli.plot import write_plot

MIB = 2**20
# recorded from `quail explain --analyze` on the default model (CPU), trimmed, with a third
# operator answered from the cache and a paged arena's capacity added
REPORT = {
    "wall_s": 2.967, "load_s": 1.36, "rows": 5, "fresh_tokens": 538, "requested_tokens": 585,
    "cache_hits": 4, "device": "cpu-bfloat16", "model": "default", "plans": ["scan reviews"],
    "remarks": [],
    "operators": [
        {"op": 0, "kind": "ai_classify", "rows_in": 5, "rows_out": 5, "prompts": 5,
         "cache_hits": 0, "fresh_tokens": 157, "requested_tokens": 204, "seconds": 0.137},
        {"op": 1, "kind": "ai_filter", "rows_in": 8, "rows_out": 5, "prompts": 8,
         "cache_hits": 0, "fresh_tokens": 381, "requested_tokens": 381, "seconds": 0.542},
        {"op": 2, "kind": "ai_sentiment", "rows_in": 4, "rows_out": 4, "prompts": 4,
         "cache_hits": 4, "fresh_tokens": 0, "requested_tokens": 0, "seconds": 0.002},
    ],
    "timeline": {
        "phases": [{"name": "parse", "start": 0.0, "end": 0.002},
                   {"name": "estimate", "start": 0.901, "end": 2.411},
                   {"name": "filters", "start": 2.411, "end": 2.716},
                   {"name": "statement", "start": 2.716, "end": 2.967}],
        "operators": [
            {"op": 1, "kind": "ai_filter", "start": 2.029, "end": 2.403, "prompts": 2,
             "cache_hits": 0, "kv_bytes": 0, "kv_capacity_bytes": 8 * MIB, "kv_prefixes": 0},
            {"op": 1, "kind": "ai_filter", "start": 2.411, "end": 2.579, "prompts": 6,
             "cache_hits": 0, "kv_bytes": 2174976, "kv_capacity_bytes": 8 * MIB,
             "kv_prefixes": 6},
            {"op": 0, "kind": "ai_classify", "start": 2.5795, "end": 2.716, "prompts": 5,
             "cache_hits": 0, "kv_bytes": 2598912, "kv_capacity_bytes": 8 * MIB,
             "kv_prefixes": 7},
            {"op": 2, "kind": "ai_sentiment", "start": 2.8, "end": 2.802, "prompts": 4,
             "cache_hits": 4}],
        "batches": [
            {"op": 1, "start": 2.2768, "end": 2.4028, "passes": 2, "fresh_tokens": 119,
             "requested_tokens": 119, "gpu_pass_s": 0.0, "kv_bytes": 0,
             "kv_capacity_bytes": 8 * MIB, "kv_prefixes": 0},
            {"op": 1, "start": 2.4127, "end": 2.5789, "passes": 2, "fresh_tokens": 262,
             "requested_tokens": 262, "gpu_pass_s": 0.0, "kv_bytes": 2174976,
             "kv_capacity_bytes": 8 * MIB, "kv_prefixes": 6},
            {"op": 0, "start": 2.58, "end": 2.7156, "passes": 3, "fresh_tokens": 157,
             "requested_tokens": 204, "gpu_pass_s": 0.0, "kv_bytes": 2598912,
             "kv_capacity_bytes": 8 * MIB, "kv_prefixes": 7}],
        "dropped": 0,
    },
}
OPERATORS = ("ai_classify #0", "ai_filter #1", "ai_sentiment #2")


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []
        self.text: list[str] = []
        self.titles: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_title:
            self.titles.append(data)


def test_html_is_self_contained_and_names_every_operator_and_batch(tmp_path):
    out = tmp_path / "run.html"
    write_plot(REPORT, str(out))
    source = out.read_text(encoding="utf-8")
    page = _Page()
    page.feed(source)
    page.close()
    assert source.startswith("<!DOCTYPE html>") and "svg" in page.tags
    assert "script" not in page.tags and page.urls == []  # nothing runs, nothing fetched
    text = " ".join(page.text)
    for name in OPERATORS:
        assert name in text
    batches = [t for t in page.titles if "passes" in t]
    assert len(batches) == 3
    assert "3 passes, 157 fresh / 204 requested tokens" in batches[2]
    assert "4 of 4 from cache" in text and "0 of 8 from cache" in text
    assert [p.name for p in tmp_path.iterdir()] == ["run.html"]  # no temporary file left


def test_png_is_an_image_with_every_operator_named(tmp_path):
    from matplotlib.image import imread

    from quail_engine.cli.plot_png import figure

    out = tmp_path / "run.png"
    write_plot(REPORT, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(out)
    assert pixels.shape[0] > 400 and pixels.shape[1] > 800
    assert pixels.std() > 0.05  # something is drawn
    labels = {t.get_text() for ax in figure(chart_of(REPORT)).axes
              for t in ax.get_yticklabels()}
    assert set(OPERATORS) <= labels and "engine batches" in labels


def test_chart_series_follow_the_timeline():
    chart = chart_of(REPORT)
    assert chart.operators == list(OPERATORS)
    rate = chart.rates[2]
    assert rate[2] == pytest.approx(157 / (2.7156 - 2.58))
    assert [v for _, v in chart.kv] == [0.0, 0.0, 0.0, 2174976 / MIB, 2174976 / MIB,
                                        2598912 / MIB, 2598912 / MIB]
    assert chart.kv_capacity_mib == 8
    assert [(name, prompts, hits) for name, _, prompts, hits in chart.cache] == [
        ("ai_classify #0", 5, 0), ("ai_filter #1", 8, 0), ("ai_sentiment #2", 4, 4)]


def test_a_gpu_batch_says_how_much_of_it_the_gpu_spent_in_passes():
    report = json.loads(json.dumps(REPORT))
    report["timeline"]["batches"][0]["gpu_pass_s"] = 0.063
    tips = [tip for *_, tip, _, _ in chart_of(report).lanes[-1].spans]
    assert tips[0].endswith("GPU in passes 50% of it") and "GPU" not in tips[1]


def test_a_report_without_a_timeline_still_draws():
    chart = chart_of({"operators": [], "wall_s": 0.0})
    assert chart.lanes[-1].label == "engine batches" and chart.end_s > 0


@pytest.mark.parametrize("top,count,cover,ticks", [
    (2.967, 8, False, [0, 0.5, 1, 1.5, 2, 2.5]), (0, 8, False, [0]),
    (1580, 4, True, [0, 500, 1000, 1500, 2000]), (2000, 4, True, [0, 500, 1000, 1500, 2000]),
    (0.03, 3, True, [0, 0.01, 0.02, 0.03])])
def test_nice_ticks(top, count, cover, ticks):
    assert nice_ticks(top, count, cover) == pytest.approx(ticks)


@pytest.mark.parametrize("args,message", [
    (["--plot", "{tmp}/t.html"], "--plot draws a real run: add --analyze"),
    (["--analyze", "--plot", "{tmp}/t.svg"], "expected a .html or .png file"),
    (["--analyze", "--plot", "{tmp}/missing/t.html"], "folder"),
])
def test_bad_plot_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, args, message):
    argv = ["explain", "-e", "SELECT ai_filter('x' || a) FROM t", "--dialect", "snowflake",
            *[a.format(tmp=tmp_path) for a in args]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_png_without_matplotlib_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    argv = ["explain", "-e", "SELECT 1", "--analyze", "--plot", str(tmp_path / "t.png")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "pip install 'dbt-quail[plot]'" in err and err.count("\n") == 1
