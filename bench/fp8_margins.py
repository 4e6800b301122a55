"""fp8 on trained weights, per decision: the float32 margin each decision is read from and how far
each reduced precision moves it (CPU emulation, bench/fp8_emulation.py's schemes).

A decision is the sign of the margin the product reads: the filter's calibrated TRUE-FALSE logit
margin (Answer.margin of the yes/no readout, the content-free reference subtracted) over the
labelled reviews, and the pair layout's PMI - PAIR_THRESHOLD (Answer.margin) over
tests/data/pairs_labelled.jsonl with either side as the document. Per variant: the shift of
every margin from float32, the flips (vs float32 and vs bf16) with their float32 margins,
agreement restricted to the decisions bf16 itself decides stably (|float32 margin| above the
largest bf16 - float32 shift seen on the set), and the flips a Gaussian shift of the measured
rms would give (sum over decisions of Phi(-|m| / rms)).

Variants: those of bench/fp8_emulation.py (float32, bf16, fp8, fp8_mlp_only, fp8_block), and
scheme changes to the block scheme:

  fp8_block_on_bf16   the block scheme with the rest of the model in bf16 (norms, attention,
                      residual, LM head), as the GPU path's fp8 mode runs it
  fp8_block_g64       128 x 128 weight blocks, activations in 1 x 64 groups
  fp8_block_ends_bf16 the first and last layers' projections as bf16 GEMMs (inputs and weights
                      rounded to bf16, product rounded to bf16), the others block fp8

    python -m bench fp8-margins     # writes bench/results/cpu-fp8-margins-<date>.json|md
    python -m bench fp8-margins --variants fp8_block_g64 --reuse <earlier .json>
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import sys
import time

import torch
from torch import nn

from bench.fp8_emulation import PROJECTIONS, VARIANTS, Fp8Linear, _emulate, pair_answers

TRIES = ("fp8_block_on_bf16", "fp8_block_g64", "fp8_block_ends_bf16")
SETS = ("filter", "pairs")
QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


class Bf16Linear(nn.Module):
    """y = bf16(x) @ bf16(W)^T, accumulated in float32 and rounded to bf16 (a bf16 GEMM)."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.weight = nn.Parameter(linear.weight.detach().to(torch.bfloat16).float(),
                                   requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.to(torch.bfloat16).float() @ self.weight.t()
        return y.to(torch.bfloat16).to(x.dtype)


def emulate_block(model: nn.Module, group: int = 128, bf16_layers: tuple[int, ...] = ()) -> int:
    """Every projection of every decoder layer as a block-scaled fp8 GEMM (activation groups of
    `group`), those of `bf16_layers` (negative counts from the end) as bf16 GEMMs; returns how
    many were swapped."""
    layers = model.model.layers
    keep = {i % len(layers) for i in bf16_layers}
    swapped = 0
    for index, layer in enumerate(layers):
        for module in list(layer.modules()):
            for name in PROJECTIONS["all"]:
                child = getattr(module, name, None)
                if isinstance(child, nn.Linear):
                    setattr(module, name, Bf16Linear(child) if index in keep
                            else Fp8Linear(child, block=True, group=group))
                    swapped += 1
    return swapped


def load_variant(spec: str, variant: str):
    """A fresh engine (no KV or answers carried over) computing as `variant`."""
    from quail_engine.infer.engine import LocalEngine

    on_bf16 = variant in ("bf16", "fp8_block_on_bf16")
    engine = LocalEngine.load(spec, "cpu", "bf16" if on_bf16 else "float32")
    if variant in VARIANTS:
        _emulate(engine.model, variant)
    elif variant == "fp8_block_on_bf16":
        emulate_block(engine.model)
    elif variant == "fp8_block_g64":
        emulate_block(engine.model, group=64)
    elif variant == "fp8_block_ends_bf16":
        emulate_block(engine.model, bf16_layers=(0, -1))
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return engine


def measure(spec: str, variant: str, sets: tuple[str, ...]) -> dict:
    from bench import ask
    from bench.accuracy import DEV, FILTER_Q, load_rows

    start = time.perf_counter()
    engine = load_variant(spec, variant)
    out: dict = {}
    if "filter" in sets:
        reviews, _ = load_rows()
        dev, _ = load_rows(DEV)
        rows = reviews + dev
        answers = ask.ask_boolean(engine, [r["text"] for r in rows], FILTER_Q)
        # the content-free prompt's own margin: subtracted from every review's (calibration)
        from quail_engine.infer.prompt_layout import CONTENT_FREE

        reference = ask.ask_boolean(engine, [CONTENT_FREE], FILTER_Q, calibrate=False)[0]
        out["filter"] = {"margins": [round(a.margin, 6) for a in answers],
                         "truth": [r["sentiment"] == "positive" for r in rows],
                         "reference": round(reference.margin, 6)}
    if "pairs" in sets:
        answers, truth = pair_answers(engine)
        out["pairs"] = {"margins": [round(a.margin, 6) for a in answers], "truth": truth}
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


# -- analysis (pure) ------------------------------------------------------------------------


def _phi(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def expected_flips(ref: list[float], rms: float) -> float:
    """Flips a zero-mean Gaussian shift of `rms` would make on margins `ref`."""
    if rms <= 0:
        return 0.0
    return sum(_phi(-abs(m) / rms) for m in ref)


def rms_for_flips(ref: list[float], flips: float) -> float:
    """The Gaussian shift rms at which `flips` decisions of `ref` are expected to flip."""
    lo, hi = 0.0, max(abs(m) for m in ref) + 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_flips(ref, mid) < flips else (lo, mid)
    return (lo + hi) / 2


def _quantiles(values: list[float]) -> dict[str, float]:
    t = torch.tensor(values, dtype=torch.float64)
    return {f"q{round(q * 100)}": round(float(torch.quantile(t, q)), 4) for q in QUANTILES}


def _agree(a: list[float], b: list[float], keep: list[bool] | None = None) -> float | None:
    pairs = [(x, y) for i, (x, y) in enumerate(zip(a, b)) if keep is None or keep[i]]
    if not pairs:
        return None
    return round(sum((x > 0) == (y > 0) for x, y in pairs) / len(pairs), 4)


def analyse(margins: dict[str, list[float]], ref: str = "float32", base: str = "bf16") -> dict:
    """Per variant of `margins` (variant -> margins of one set, `ref` and `base` among them):
    shifts from `ref`, flips vs `ref` and `base` with the float32 margins they had, agreement
    on the decisions `base` decides stably, and the Gaussian-shift flip model."""
    m32 = margins[ref]
    n = len(m32)
    mb = margins[base]
    bf16_shift = max(abs(b - r) for b, r in zip(mb, m32))
    stable = [abs(r) > bf16_shift for r in m32]
    magnitude = sorted(abs(m) for m in m32)
    out: dict = {"decisions": n, "abs_margin": _quantiles([abs(m) for m in m32]),
                 "margin_spread": round(float(torch.tensor(m32).std()), 4),
                 "bf16_max_shift": round(bf16_shift, 4), "stable_decisions": sum(stable),
                 "rms_shift_for_99": round(rms_for_flips(m32, 0.01 * n), 4),
                 "variants": {}}
    for name, mv in margins.items():
        if name == ref:
            continue
        shift = [v - r for v, r in zip(mv, m32)]
        rms = math.sqrt(sum(s * s for s in shift) / n)
        mean = sum(shift) / n
        row: dict = {
            "shift_rms": round(rms, 4), "shift_mean": round(mean, 4),
            # the part of the shift that differs between decisions (the common offset removed)
            "shift_rms_centered": round(math.sqrt(max(rms * rms - mean * mean, 0.0)), 4),
            "shift_max": round(max(abs(s) for s in shift), 4),
            "agree_float32": _agree(mv, m32), "agree_bf16": _agree(mv, mb),
            "agree_float32_stable": _agree(mv, m32, stable),
            "agree_bf16_stable": _agree(mv, mb, stable),
            "expected_flips_float32": round(expected_flips(m32, rms), 2)}
        if name != base:
            to_base = [v - b for v, b in zip(mv, mb)]
            row["shift_rms_vs_bf16"] = round(math.sqrt(sum(s * s for s in to_base) / n), 4)
        for against, other in ((ref, m32), (base, mb)):
            if name == against:
                continue
            flips = [i for i in range(n) if (mv[i] > 0) != (other[i] > 0)]
            row[f"flips_{against}"] = [
                {"i": i, "float32": round(m32[i], 4), "bf16": round(mb[i], 4),
                 "variant": round(mv[i], 4),
                 # share of decisions with a smaller |float32 margin|
                 "rank": round(sum(a < abs(m32[i]) for a in magnitude) / n, 4)}
                for i in flips]
        out["variants"][name] = row
    return out


def markdown(r: dict) -> str:
    lines = [f"# fp8 on trained weights, per decision: margins and their shifts ({r['date']})",
             "", f"Command: `{r['command']}`; {r['seconds']} s on {r['machine']}, `uptime` load "
             f"average {r['load_before']} before, {r['load_after']} after.", ""]
    if r.get("reused"):
        lines += [f"Variants {', '.join(r['reused']['variants'])} were read from "
                  f"`{r['reused']['path']}` (command `{r['reused']['command']}`, load "
                  f"{r['reused']['load_before']} / {r['reused']['load_after']}).", ""]
    lines += [
        f"Model {r['model']}, CPU emulation (bench/fp8_emulation.py, bench/fp8_margins.py). "
        "A decision is the sign of the margin the product reads: filter = the calibrated "
        "yes-no logit margin over the labelled reviews; pairs = PMI - threshold of the pair "
        "layout, either side as the document. Shift = variant margin - float32 margin. "
        "Stable = decisions whose |float32 margin| exceeds the largest bf16 shift on the set. "
        "Model flips = sum of Phi(-|m32| / shift rms) over the set: the flips a Gaussian "
        "shift of that size would make.", "",
        "## |float32 margin|", "",
        "| set | decisions | min | 1% | 5% | 10% | 25% | median | 75% | 90% | max | spread "
        "(std) | bf16 max shift | stable | shift rms for 99% |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in SETS:
        a = r["analysis"].get(s)
        if not a:
            continue
        q = a["abs_margin"]
        lines.append(f"| {s} | {a['decisions']} | " + " | ".join(str(q[f'q{round(x * 100)}'])
                                                             for x in QUANTILES)
                     + f" | {a['margin_spread']} | {a['bf16_max_shift']} | "
                       f"{a['stable_decisions']} | {a['rms_shift_for_99']} |")
    for s in SETS:
        a = r["analysis"].get(s)
        if not a:
            continue
        lines += ["", f"## {s}", ""]
        if a.get("reference"):
            lines += ["The content-free prompt's own margin (subtracted from every review's): "
                      + ", ".join(f"{v} {m}" for v, m in a["reference"].items()) + ".", ""]
        lines += [
                  "| variant | shift rms | mean shift | shift rms, mean removed | vs bf16 rms "
                  "| max shift | agree fp32 | agree bf16 | "
                  f"stable ({a['stable_decisions']}): agree fp32 | stable: agree bf16 | "
                  "flips fp32 | model flips | flips bf16 | |float32 margin| of flips vs bf16 "
                  "(rank) |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for v, row in a["variants"].items():
            fb = row.get("flips_bf16", [])
            detail = ", ".join(f"{abs(f['float32'])} ({f['rank']})"
                               for f in sorted(fb, key=lambda f: abs(f["float32"])))
            lines.append(
                f"| {v} | {row['shift_rms']} | {row['shift_mean']} | {row['shift_rms_centered']} | "
                f"{row.get('shift_rms_vs_bf16', '-')} | "
                f"{row['shift_max']} | {row['agree_float32']} | {row['agree_bf16'] or '-'} | "
                f"{row['agree_float32_stable']} | {row['agree_bf16_stable'] or '-'} | "
                f"{len(row.get('flips_float32', []))} | {row['expected_flips_float32']} | "
                f"{len(fb) if v != 'bf16' else '-'} | {detail if v != 'bf16' else '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from bench.results_io import write_result

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS + TRIES)
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--reuse", default=None,
                    help="an earlier result of this suite: its variants are not run again")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    start = time.perf_counter()
    load_before = round(os.getloadavg()[0], 2)
    measured: dict = {}
    reused = None
    if args.reuse:
        old = json.loads(open(args.reuse).read())
        measured = old["measured"]
        reused = {"path": args.reuse, "command": old["command"], "variants": list(measured),
                  "load_before": old["load_before"], "load_after": old["load_after"]}
    for variant in ("float32", "bf16", *args.variants):
        if variant not in measured:
            measured[variant] = measure(args.model, variant, tuple(args.sets))
    analysis = {s: analyse({v: m[s]["margins"] for v, m in measured.items() if s in m})
                for s in args.sets}
    if "filter" in analysis:
        analysis["filter"]["reference"] = {v: m["filter"]["reference"]
                                           for v, m in measured.items() if "filter" in m}
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(["python -m bench fp8-margins", *(argv or sys.argv[1:])]),
              "machine": f"{os.cpu_count()} vCPU, torch {torch.__version__}",
              "model": args.model, "load_before": load_before,
              "load_after": round(os.getloadavg()[0], 2),
              "seconds": round(time.perf_counter() - start, 1), "reused": reused,
              "analysis": analysis, "measured": measured}
    write_result(result, "cpu-fp8-margins", markdown, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
