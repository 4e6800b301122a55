"""The report's timeline as a Chart: the lanes and series both `--plot` renderers draw
(cli/plot_html.py, cli/plot_png.py), taken from the report's JSON (exec/report.py, its
`timeline`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Lane:
    """One row of the time axis: `spans` are (start s, end s, tooltip, operator id or -1,
    a short text drawn on the bar where it fits)."""

    label: str
    group: str  # "phase", "op" or "engine"
    spans: list[tuple[float, float, str, int, str]] = field(default_factory=list)


@dataclass
class Chart:
    """What both renderers draw, taken from one report's JSON."""

    title: str
    subtitle: str
    end_s: float
    lanes: list[Lane]
    rates: list[tuple[float, float, float]]  # (start, end, fresh tokens/s) of each batch
    kv: list[tuple[float, float]]            # (time s, MiB resident) after batches and calls
    kv_capacity_mib: float | None
    cache: list[tuple[str, int, int, int]]   # (operator, op id, prompts, cache hits)
    operators: list[str] = field(default_factory=list)
    op_ids: list[int] = field(default_factory=list)  # in lane order; a colour each

    def color_index(self, op: int) -> int:
        return self.op_ids.index(op) if op in self.op_ids else -1


def op_name(kind: str, op: int) -> str:
    """An operator's name as the progress display and the plot spell it: `ai_filter #1`."""
    return f"{kind} #{op}"


def chart_of(report: dict) -> Chart:
    """The lanes and series of `report`'s timeline."""
    timeline = report.get("timeline") or {}
    phases, calls = timeline.get("phases", []), timeline.get("operators", [])
    batches = timeline.get("batches", [])
    kinds = {o["op"]: o["kind"] for o in report.get("operators", [])}
    kinds.update({c["op"]: c["kind"] for c in calls if c["op"] not in kinds})
    lanes: dict[str, Lane] = {}
    for p in phases:
        lane = lanes.setdefault("phase " + p["name"], Lane(p["name"], "phase"))
        lane.spans.append((p["start"], p["end"], f"{p['name']}: {_s(p['end'] - p['start'])}",
                           -1, ""))
    for op in sorted(kinds):
        lanes[f"op {op}"] = Lane(op_name(kinds[op], op), "op")
    for c in calls:
        tip = (f"{op_name(c['kind'], c['op'])}: {c['prompts']} prompts, {c['cache_hits']} from "
               f"cache, {_s(c['end'] - c['start'])}")
        lanes[f"op {c['op']}"].spans.append((c["start"], c["end"], tip, c["op"], ""))
    engine = Lane("engine batches", "engine")
    rates = []
    for b in batches:
        seconds = max(b["end"] - b["start"], 1e-9)
        rate = b["fresh_tokens"] / seconds
        gpu = b.get("gpu_pass_s") or 0.0
        engine.spans.append((b["start"], b["end"], (
            f"{op_name(kinds.get(b['op'], 'op'), b['op'])}: {b['passes']} passes, "
            f"{b['fresh_tokens']} fresh / {b['requested_tokens']} requested tokens, "
            f"{_s(seconds)}, {rate:,.0f} tokens/s"
            + (f", GPU in passes {100 * gpu / seconds:.0f}% of it" if gpu else "")),
            b["op"], _passes(b["passes"])))
        rates.append((b["start"], b["end"], rate))
    samples = sorted([(e["end"], e["kv_bytes"]) for e in (*batches, *calls)
                      if e.get("kv_bytes") is not None])
    capacity = max((e.get("kv_capacity_bytes") or 0 for e in (*batches, *calls)), default=0)
    ends = [e["end"] for e in (*phases, *calls, *batches)]
    end_s = max([report.get("wall_s", 0.0), *ends, 1e-3])
    cache = [(op_name(o["kind"], o["op"]), o["op"], o.get("prompts", 0), o.get("cache_hits", 0))
             for o in report.get("operators", [])]
    total = report.get("fresh_tokens", 0)
    return Chart(
        title="quail explain --analyze: timeline",
        subtitle=(f"{report.get('model') or 'no model'} on {report.get('device') or '?'}; "
                  f"wall {_s(report.get('wall_s', 0.0))} (model load {_s(report.get('load_s', 0.0))}"
                  f"); {report.get('rows', 0)} rows; {total:,} fresh tokens; "
                  f"{report.get('cache_hits', 0)} cache hits; {len(batches)} engine batches, "
                  f"{sum(b['passes'] for b in batches)} forward passes"),
        end_s=end_s,
        lanes=[*lanes.values(), engine],
        rates=rates,
        kv=[(0.0, 0.0)] + [(t, b / 2**20) for t, b in samples],
        kv_capacity_mib=capacity / 2**20 if capacity else None,
        cache=cache,
        operators=[op_name(kinds[op], op) for op in sorted(kinds)],
        op_ids=sorted(kinds),
    )


def _passes(n: int) -> str:
    return f"{n} pass" if n == 1 else f"{n} passes"


def _s(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def nice_ticks(top: float, count: int = 8, cover: bool = False) -> list[float]:
    """At most `count` + 1 round ticks from 0 (steps of 1, 2 or 5 times a power of ten) up to
    `top`, or (`cover`) up to the first tick at or above it."""
    if top <= 0:
        return [0.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    last = math.ceil(top / step - 1e-9) if cover else math.floor(top / step + 1e-9)
    return [i * step for i in range(last + 1)]
