"""Where a query's GPU time went, pass by pass: the forward passes the report's timeline lists
under each engine batch (`pass_log`, GPU path only), grouped by kind, each group against the
speed of light of its own work (its tokens and causal attention pairs on the device's peaks).

Kinds: `plain` (no sequence reads a prefix: documents of a filter, the beginnings prefix sharing
computes first, a join's anchors) and `over prefix` (sequences continuing resident KV: join
partners over their anchor, rows over a shared beginning).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from quail_engine.plan.cost import ModelSpec, Work, seconds

log = logging.getLogger(__name__)
KINDS = ("plain", "over prefix")


def model_and_device(model_dir: Path, device: str, precision: str):
    """(ModelSpec of the model in `model_dir`, the device's peaks: the datasheet's for
    `precision` on a GPU, the measured CPU's otherwise), or (None, None) for a model without a
    config.json to read its shape from (a GGUF-only one)."""
    from quail_engine.plan.device import device_spec

    try:
        config = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError) as exc:
        log.warning("no model config for the speed of light: %s", exc)
        return None, None
    spec = device_spec(device, precision, datasheet=True) if device == "cuda" \
        else device_spec("cpu")
    return ModelSpec.from_config(config, str(model_dir)), spec


def passes(report: dict) -> list[dict]:
    """Every logged pass of the report's engine batches, in order."""
    return [p for b in (report.get("timeline") or {}).get("batches", [])
            for p in b.get("pass_log") or ()]


def summarize(report: dict, model: ModelSpec | None = None, device=None) -> dict[str, dict]:
    """Per kind: passes, tokens, prefix_tokens, attention_pairs, gpu_s, tokens_per_s, and with
    `model` and `device` (plan.cost) sol_s and x_sol (gpu_s / sol_s)."""
    out: dict[str, dict] = {}
    for p in passes(report):
        kind = KINDS[1] if p.get("prefix_tokens") else KINDS[0]
        g = out.setdefault(kind, {"passes": 0, "tokens": 0, "prefix_tokens": 0,
                                  "attention_pairs": 0, "gpu_s": 0.0})
        g["passes"] += 1
        for key in ("tokens", "prefix_tokens", "attention_pairs"):
            g[key] += int(p.get(key) or 0)
        g["gpu_s"] += float(p.get("gpu_s") or 0.0)
    for g in out.values():
        g["gpu_s"] = round(g["gpu_s"], 4)
        g["tokens_per_s"] = round(g["tokens"] / g["gpu_s"]) if g["gpu_s"] else None
        if model is not None and device is not None:
            sol = seconds(model, device, Work(fresh_tokens=g["tokens"],
                                              attention_pairs=g["attention_pairs"]), g["passes"])
            g["sol_s"] = float(f"{sol:.4g}")
            g["x_sol"] = round(g["gpu_s"] / sol, 2) if sol and g["gpu_s"] else None
    return out


def markdown(summary: dict[str, dict]) -> list[str]:
    """Table lines for `summarize`'s result (empty when no pass was logged)."""
    if not summary:
        return []
    lines = ["| passes of kind | passes | tokens | prefix tokens read | attention pairs | GPU s | "
             "tokens/s | SoL s | x SoL |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, g in summary.items():
        lines.append(f"| {kind} | {g['passes']} | {g['tokens']:,} | {g['prefix_tokens']:,} | "
                     f"{g['attention_pairs']:,} | {g['gpu_s']} | {g['tokens_per_s']} | "
                     f"{g.get('sol_s', '-')} | {g.get('x_sol', '-')} |")
    return lines
