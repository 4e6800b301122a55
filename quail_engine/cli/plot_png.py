"""The timeline as a PNG through matplotlib's Agg canvas (no pyplot: no global figure state,
no display needed). The same panels as the HTML: lanes, fresh tokens/s, the KV arena, cache
hits per operator."""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from quail_engine.cli.chart import Chart

PHASE_COLOR = "#b0b7bf"


def render_png(chart: Chart, path: str) -> None:
    figure(chart).savefig(path, format="png", dpi=100)


def figure(chart: Chart) -> Figure:
    """The timeline's matplotlib Figure (on an Agg canvas)."""
    colors = [f"C{i % 10}" for i in range(len(chart.op_ids))]

    def color(op: int) -> str:
        index = chart.color_index(op)
        return PHASE_COLOR if index < 0 else colors[index]

    num_lanes, num_ops = len(chart.lanes), max(1, len(chart.cache))
    heights = [0.3 * num_lanes + 0.4, 1.4, 1.4, 0.3 * num_ops + 0.4]
    fig = Figure(figsize=(12, sum(heights) + 1.6), layout="constrained")
    FigureCanvasAgg(fig)
    lanes_ax, rate_ax, kv_ax, cache_ax = fig.subplots(4, 1, height_ratios=heights)
    fig.suptitle(f"{chart.title}\n{chart.subtitle}", fontsize=9)

    for row, lane in enumerate(chart.lanes):
        y = num_lanes - 1 - row
        for start, end, _, op, short in lane.spans:
            lanes_ax.barh(y, max(end - start, chart.end_s / 1500), left=start, height=0.8,
                          color=color(op))
            if short and (end - start) / chart.end_s > 0.012 * len(short):
                lanes_ax.text((start + end) / 2, y, short, ha="center", va="center",
                              fontsize=7, color="white")
    lanes_ax.set_yticks(range(num_lanes), [lane.label for lane in reversed(chart.lanes)],
                        fontsize=8)
    for label, lane in zip(lanes_ax.get_yticklabels(), reversed(chart.lanes)):
        label.set_fontweight("normal" if lane.group == "phase" else "bold")

    for start, end, rate in chart.rates:
        rate_ax.bar(start, rate, width=max(end - start, chart.end_s / 1500), align="edge",
                    color="C0")
    rate_ax.set_ylabel("fresh tokens/s", fontsize=8)

    if chart.kv:
        times = [t for t, _ in chart.kv] + [chart.end_s]
        values = [v for _, v in chart.kv] + [chart.kv[-1][1]]
        kv_ax.step(times, values, where="post", color="C2")
    if chart.kv_capacity_mib:
        kv_ax.axhline(chart.kv_capacity_mib, color="C3", linestyle="--", linewidth=1,
                      label="capacity")
        kv_ax.legend(fontsize=7, loc="upper left")
    kv_ax.set_ylabel("KV arena MiB", fontsize=8)
    kv_ax.set_ylim(0, 1.1 * max([v for _, v in chart.kv] + [chart.kv_capacity_mib or 0, 1]))
    rate_ax.set_ylim(0, 1.1 * max([r for *_, r in chart.rates] + [1]))

    for ax in (lanes_ax, rate_ax, kv_ax):
        ax.set_xlim(0, chart.end_s)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=8)
    kv_ax.set_xlabel("seconds since the execution started", fontsize=8)

    names = [name for name, *_ in chart.cache]
    ys = range(len(chart.cache) - 1, -1, -1)
    cache_ax.barh(list(ys), [p for *_, p, _ in chart.cache], color="#ddd", height=0.7)
    cache_ax.barh(list(ys), [h for *_, h in chart.cache], height=0.7,
                  color=[color(op) for _, op, _, _ in chart.cache])
    for y, (_, _, prompts, hits) in zip(ys, chart.cache):
        cache_ax.text(prompts, y, f"  {hits} of {prompts} from cache", va="center", fontsize=8)
    cache_ax.set_yticks(list(ys), names, fontsize=8)
    cache_ax.set_xlabel("prompts (coloured: answered from the answer cache)", fontsize=8)
    cache_ax.set_xlim(0, max([p for *_, p, _ in chart.cache] + [1]) * 1.3)
    cache_ax.tick_params(labelsize=8)
    return fig
