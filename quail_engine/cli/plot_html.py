"""The timeline as one self-contained HTML file: inline SVG and CSS, no script, nothing fetched.
Every bar has a tooltip (<title>) with its figures; a table of the operators follows."""

from __future__ import annotations

from html import escape

from quail_engine.cli.chart import Chart, nice_ticks, op_name

WIDTH, LEFT, RIGHT = 1100, 200, 30
LANE, GAP = 18, 5
PANEL = 110
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
PHASE_COLOR = "#b0b7bf"
STYLE = ("body{font:13px system-ui,sans-serif;margin:20px;color:#222}"
         "h1{font-size:18px;margin:0 0 4px}p{margin:0 0 12px;color:#555}"
         "svg text{font:11px system-ui,sans-serif;fill:#222}"
         "table{border-collapse:collapse;margin-top:16px}"
         "td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:right}"
         "td:first-child,th:first-child{text-align:left}")
COLUMNS = ("rows_in", "rows_out", "prompts", "cache_hits", "fresh_tokens", "requested_tokens",
           "kv_hit_tokens", "est_seconds", "seconds", "engine_s", "host_wait_s")


def color(chart: Chart, op: int) -> str:
    index = chart.color_index(op)
    return PHASE_COLOR if index < 0 else PALETTE[index % len(PALETTE)]


def render_html(chart: Chart, report: dict) -> str:
    svg = _Svg(chart)
    svg.lanes()
    svg.series("fresh tokens/s", [(a, b, r) for a, b, r in chart.rates], bars=True)
    svg.series("KV arena MiB", _steps(chart.kv, chart.end_s), cap=chart.kv_capacity_mib)
    svg.cache_hits()
    rows = "".join(
        "<tr>" + f"<td>{escape(op_name(o['kind'], o['op']))}</td>"
        + "".join(f"<td>{_cell(o.get(c))}</td>" for c in COLUMNS) + "</tr>"
        for o in report.get("operators", []))
    head = "".join(f"<th>{c.replace('_', ' ')}</th>" for c in ("operator", *COLUMNS))
    remarks = "".join(f"<p>remark: {escape(r)}</p>" for r in report.get("remarks", []))
    plans = escape("\n".join(report.get("plans", [])))
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(chart.title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{escape(chart.title)}</h1><p>{escape(chart.subtitle)}</p>{svg.text()}"
            f"<table><tr>{head}</tr>{rows}</table>{remarks}"
            f"<pre>{plans}</pre></body></html>\n")


class _Svg:
    def __init__(self, chart: Chart):
        self.chart, self.parts, self.y = chart, [], 10
        self.scale = (WIDTH - LEFT - RIGHT) / chart.end_s

    def x(self, t: float) -> float:
        return round(LEFT + t * self.scale, 2)

    def lanes(self) -> None:
        top = self.y
        for lane in self.chart.lanes:
            self._label(lane.label, self.y + LANE / 2, bold=lane.group != "phase")
            for start, end, tip, op, short in lane.spans:
                x0, x1 = self.x(start), self.x(end)
                self.parts.append(
                    f'<rect x="{x0}" y="{self.y}" width="{max(x1 - x0, 1.5):.2f}" '
                    f'height="{LANE}" fill="{color(self.chart, op)}">'
                    f"<title>{escape(tip)}</title></rect>")
                if short and x1 - x0 > 7 * len(short) + 4:
                    self.parts.append(f'<text x="{(x0 + x1) / 2:.2f}" y="{self.y + 13}" '
                                      f'text-anchor="middle" style="fill:#fff">'
                                      f"{escape(short)}</text>")
            self.y += LANE + GAP
        self._time_axis(top)

    def series(self, name: str, points, bars: bool = False, cap: float | None = None) -> None:
        """`points`: (start, end, value) segments; bars fill down to zero."""
        self.y += 20
        top, bottom = self.y, self.y + PANEL
        peak = max([v for _, _, v in points] + [cap or 0.0, 1.0])
        ticks = nice_ticks(peak, 4, cover=True)
        high = ticks[-1]
        ys = lambda v: round(bottom - v / high * PANEL, 2)  # noqa: E731
        for v in ticks:
            self.parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{ys(v)}" '
                              f'y2="{ys(v)}" stroke="#eee"/>')
            self.parts.append(f'<text x="{LEFT - 10}" y="{ys(v) + 4}" text-anchor="end">'
                              f"{_num(v)}</text>")
        self._label(name, top - 4, bold=True, anchor="start", x=LEFT)
        if bars:
            for start, end, v in points:
                x0, x1 = self.x(start), self.x(end)
                self.parts.append(f'<rect x="{x0}" y="{ys(v)}" width="{max(x1 - x0, 1.5):.2f}" '
                                  f'height="{round(bottom - ys(v), 2)}" fill="#1f77b4">'
                                  f"<title>{v:,.0f} {escape(name)}</title></rect>")
        else:
            path = " ".join(f"M{self.x(a)},{ys(v)} H{self.x(b)}" if i == 0 else
                            f"V{ys(v)} H{self.x(b)}" for i, (a, b, v) in enumerate(points))
            self.parts.append(f'<path d="{path}" fill="none" stroke="#2ca02c" stroke-width="2"/>')
        if cap:
            self.parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{ys(cap)}" '
                              f'y2="{ys(cap)}" stroke="#d62728" stroke-dasharray="4 3"/>')
        self.y = bottom
        self._time_axis(top)

    def cache_hits(self) -> None:
        self.y += 16
        self._label("cache hits / prompts", self.y, bold=True, anchor="start", x=LEFT)
        self.y += 8
        most = max([p for _, _, p, _ in self.chart.cache] + [1])
        width = WIDTH - LEFT - RIGHT - 160
        for name, op, prompts, hits in self.chart.cache:
            self._label(name, self.y + LANE / 2, bold=True)
            tip = escape(f"{name}: {hits} of {prompts} prompts from the answer cache")
            self.parts.append(f'<rect x="{LEFT}" y="{self.y}" height="{LANE}" '
                              f'width="{prompts / most * width:.2f}" fill="#ddd">'
                              f"<title>{tip}</title></rect>")
            self.parts.append(f'<rect x="{LEFT}" y="{self.y}" height="{LANE}" '
                              f'width="{hits / most * width:.2f}" fill="{color(self.chart, op)}">'
                              f"<title>{tip}</title></rect>")
            self.parts.append(f'<text x="{LEFT + prompts / most * width + 6:.2f}" '
                              f'y="{self.y + 13}">{hits} of {prompts} from cache</text>')
            self.y += LANE + GAP

    def text(self) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{self.y + 10}" '
                f'viewBox="0 0 {WIDTH} {self.y + 10}">' + "".join(self.parts) + "</svg>")

    def _time_axis(self, top: float) -> None:
        for t in nice_ticks(self.chart.end_s):
            x = self.x(t)
            self.parts.append(f'<line x1="{x}" x2="{x}" y1="{top}" y2="{self.y}" '
                              f'stroke="#000" stroke-opacity="0.08"/>')
            self.parts.append(f'<text x="{x}" y="{self.y + 14}" text-anchor="middle">'
                              f"{_num(t)} s</text>")
        self.y += 18

    def _label(self, text: str, y: float, bold: bool = False, anchor: str = "end",
               x: float | None = None) -> None:
        weight = ' font-weight="600"' if bold else ""
        self.parts.append(f'<text x="{LEFT - 8 if x is None else x}" y="{y + 4}" '
                          f'text-anchor="{anchor}"{weight}>{escape(text)}</text>')


def _steps(samples: list[tuple[float, float]], end: float) -> list[tuple[float, float, float]]:
    """(time, value) samples as segments holding each value until the next sample."""
    return [(t, samples[i + 1][0] if i + 1 < len(samples) else end, v)
            for i, (t, v) in enumerate(samples)]


def _num(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 or v == int(v) else f"{v:.3g}"


def _cell(value) -> str:
    if value is None:
        return "-"
    return escape(f"{value:.3g}" if isinstance(value, float) else str(value))
