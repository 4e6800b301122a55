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
closer to what the GPU path computes, and scheme changes to the block scheme:

  bf16_f32logits      bf16 with the LM head computed in float32 (from the bf16 hidden state
                      and weights), as GpuCausalLM.logits does: the CPU bf16 model's logits are
                      bf16, so its readout margins are differences of bf16-rounded logits (steps
                      of 1/8 at |logit| 16-32); agreement is reported against it too
  fp8_block_on_bf16   the block scheme with the rest of the model in bf16 (norms, attention,
                      residual, LM head), as the GPU path's fp8 mode runs it
  fp8_block_on_bf16_f32logits  the same with the LM head in float32, as the GPU path
  fp8_block_g64       128 x 128 weight blocks, activations in 1 x 64 groups
  fp8_block_ends_bf16 the first and last layers' projections as bf16 GEMMs (inputs and weights
                      rounded to bf16, product rounded to bf16), the others block fp8
  fp8_block_bf16_layers_<i>_<j>...  the same with the named layers in bf16 (e.g. the ones
                      --sensitivity finds loudest)

    python -m bench fp8-margins     # writes bench/results/fp8-margins.json|md
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

TRIES = ("bf16_f32logits", "fp8_block_on_bf16", "fp8_block_on_bf16_f32logits",
         "fp8_block_g64", "fp8_block_ends_bf16")
BASES = ("bf16", "bf16_f32logits")  # what agreement "with bf16" is measured against
SETS = ("filter", "pairs")
KINDS = {"qkv": ("q_proj", "k_proj", "v_proj"), "o": ("o_proj",),
         "gate_up": ("gate_proj", "up_proj"), "down": ("down_proj",)}
QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
# the band re-asked in bf16 (fp8 first, rows with |fp8 margin| < tau again in bf16)
TAUS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


class Bf16Linear(nn.Module):
    """y = bf16(x) @ bf16(W)^T, accumulated in float32 and rounded to bf16 (a bf16 GEMM)."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.weight = nn.Parameter(linear.weight.detach().to(torch.bfloat16).float(),
                                   requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.to(torch.bfloat16).float() @ self.weight.t()
        return y.to(torch.bfloat16).to(x.dtype)


def float32_logits(model: nn.Module) -> None:
    """The LM head in float32 from the model's own weights and final-normed hidden state, as the
    GPU path computes logits (GpuCausalLM.logits), instead of in the model's dtype: a bf16
    model's readout margins are then not differences of bf16-rounded logits."""
    weight = model.lm_head.weight.detach().float()
    cap = model.config.final_logit_softcapping

    def logits(hidden: torch.Tensor, token_ids: torch.Tensor | None = None) -> torch.Tensor:
        w = weight if token_ids is None else weight[token_ids]
        out = model.model.norm(hidden).float() @ w.t()
        return torch.tanh(out / cap) * cap if cap else out

    model.logits = logits


def emulate_block(model: nn.Module, group: int = 128, bf16_layers: tuple[int, ...] = (),
                  layers: tuple[int, ...] | None = None,
                  names: tuple[str, ...] = PROJECTIONS["all"]) -> int:
    """The `names` projections of the decoder layers `layers` (all if None) as block-scaled fp8
    GEMMs (activation groups of `group`), those of `bf16_layers` as bf16 GEMMs (negative
    indices count from the end); the others stay as they are. Returns how many were swapped."""
    stack = model.model.layers
    keep = {i % len(stack) for i in bf16_layers}
    chosen = set(range(len(stack))) if layers is None else {i % len(stack) for i in layers}
    swapped = 0
    for index, layer in enumerate(stack):
        if index not in chosen:
            continue
        for module in list(layer.modules()):
            for name in names:
                child = getattr(module, name, None)
                if isinstance(child, nn.Linear):
                    setattr(module, name, Bf16Linear(child) if index in keep
                            else Fp8Linear(child, block=True, group=group))
                    swapped += 1
    return swapped


def load_variant(spec: str, variant: str):
    """A fresh engine (no KV or answers carried over) computing as `variant`."""
    from quail_engine.infer.engine import LocalEngine

    on_bf16 = variant.startswith(("bf16", "fp8_block_on_bf16"))
    engine = LocalEngine.load(spec, "cpu", "bf16" if on_bf16 else "float32")
    if variant.endswith("_f32logits"):
        float32_logits(engine.model)
        variant = variant.removesuffix("_f32logits")
    if variant in VARIANTS:
        _emulate(engine.model, variant)
    elif variant == "fp8_block_on_bf16":
        emulate_block(engine.model)
    elif variant == "fp8_block_g64":
        emulate_block(engine.model, group=64)
    elif variant == "fp8_block_ends_bf16":
        emulate_block(engine.model, bf16_layers=(0, -1))
    elif variant.startswith("fp8_block_bf16_layers_"):  # e.g. fp8_block_bf16_layers_3_8
        emulate_block(engine.model, bf16_layers=tuple(
            int(i) for i in variant.removeprefix("fp8_block_bf16_layers_").split("_")))
    elif variant.startswith("fp8_block_only_layer"):  # one layer in fp8, the rest float32
        emulate_block(engine.model, layers=(int(variant.removeprefix("fp8_block_only_layer")),))
    elif variant.startswith("fp8_block_only_"):  # one projection kind in fp8 in every layer
        emulate_block(engine.model, names=KINDS[variant.removeprefix("fp8_block_only_")])
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return engine


def measure(spec: str, variant: str, sets: tuple[str, ...]) -> dict:
    from bench.accuracy import DEV, FILTER_Q, load_rows
    from quail_testing import ask

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
        out["filter"] = {"margins": [round(a.margin, 5) for a in answers],
                         "reference": round(reference.margin, 5)}
    if "pairs" in sets:
        answers, _ = pair_answers(engine)
        out["pairs"] = {"margins": [round(a.margin, 5) for a in answers]}
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


def measure_sensitivity(spec: str, m32: list[float]) -> dict:
    """Filter margins' shift from float32 with one layer, or one projection kind of every
    layer, in block fp8 and the rest float32."""
    from quail_engine.infer.loader import load_model

    start = time.perf_counter()
    num_layers = load_model(spec, "cpu", "float32")[2].num_layers
    out: dict = {}
    parts = [f"layer{i}" for i in range(num_layers)] + list(KINDS)
    for part in parts:
        m = measure(spec, f"fp8_block_only_{part}", ("filter",))["filter"]["margins"]
        shift = [a - b for a, b in zip(m, m32)]
        out[part] = {"shift_rms": round(math.sqrt(sum(x * x for x in shift) / len(shift)), 4),
                     "shift_mean": round(sum(shift) / len(shift), 4),
                     "flips_float32": sum((a > 0) != (b > 0) for a, b in zip(m, m32))}
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
    base_shift = max(abs(b - r) for b, r in zip(mb, m32))
    stable = [abs(r) > base_shift for r in m32]
    out: dict = {"base": base, "decisions": n, "abs_margin": _quantiles([abs(m) for m in m32]),
                 "margin_spread": round(float(torch.tensor(m32).std()), 4),
                 "base_max_shift": round(base_shift, 4), "stable_decisions": sum(stable),
                 "rms_shift_for_99": round(rms_for_flips(m32, 0.01 * n), 4),
                 "variants": {}}
    for name, mv in margins.items():
        if name == ref:
            continue
        shift = [v - r for v, r in zip(mv, m32)]
        rms = math.sqrt(sum(s * s for s in shift) / n)
        mean = sum(shift) / n
        to_base = [v - b for v, b in zip(mv, mb)]
        row: dict = {
            "shift_rms": round(rms, 4), "shift_mean": round(mean, 4),
            # the part of the shift that differs between decisions (the common offset removed)
            "shift_rms_centered": round(math.sqrt(max(rms * rms - mean * mean, 0.0)), 4),
            "shift_max": round(max(abs(s) for s in shift), 4),
            "shift_rms_vs_base": round(math.sqrt(sum(s * s for s in to_base) / n), 4),
            "agree_float32": _agree(mv, m32), "agree_base": _agree(mv, mb),
            "agree_float32_stable": _agree(mv, m32, stable),
            "agree_base_stable": _agree(mv, mb, stable),
            "expected_flips_float32": round(expected_flips(m32, rms), 2)}
        for key, other in (("flips_float32", m32), ("flips_base", mb)):  # decision indices
            row[key] = [i for i in range(n) if (mv[i] > 0) != (other[i] > 0)]
        row["recheck"] = recheck(mv, mb)
        out["variants"][name] = row
    return out


def recheck(mv: list[float], mb: list[float]) -> dict:
    """Agreement with `mb` when the decisions whose |margin| in `mv` is under tau take `mb`'s
    (the variant first, its uncertain band asked again in bf16), and the share so re-asked,
    per tau of TAUS; `tau99`: the smallest reaching 99% (None if none)."""
    n = len(mv)
    out: dict = {"taus": {}, "tau99": None}
    for tau in TAUS:
        picked = [b if abs(v) < tau else v for v, b in zip(mv, mb)]
        agree = round(sum((p > 0) == (b > 0) for p, b in zip(picked, mb)) / n, 4)
        out["taus"][str(tau)] = {"agree": agree,
                                 "reasked": round(sum(abs(v) < tau for v in mv) / n, 4)}
        if out["tau99"] is None and agree >= 0.99:
            out["tau99"] = tau
    return out


def rank(m32: list[float], i: int) -> float:
    """The share of decisions with a smaller |float32 margin| than decision i's."""
    return round(sum(abs(m) < abs(m32[i]) for m in m32) / len(m32), 4)


def _variant_table(a: dict, m32: list[float]) -> list[str]:
    b = a["base"]
    lines = [f"Against {b}: stable = the {a['stable_decisions']} decisions whose |float32 "
             f"margin| exceeds {a['base_max_shift']}, the largest {b} - float32 shift.", "",
             f"| variant | shift rms | mean shift | shift rms, mean removed | max shift | "
             f"rms vs {b} | agree fp32 | agree {b} | stable: agree fp32 | stable: agree {b} | "
             f"flips fp32 | model flips | flips vs {b} | |float32 margin| of the flips vs {b} "
             f"(rank) | re-ask band for 99% vs {b}: tau (share re-asked) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for v, row in a["variants"].items():
        fb = row["flips_base"]
        detail = ", ".join(f"{round(abs(m32[i]), 4)} ({rank(m32, i)})"
                           for i in sorted(fb, key=lambda i: abs(m32[i])))
        lines.append(
            f"| {v} | {row['shift_rms']} | {row['shift_mean']} | {row['shift_rms_centered']} | "
            f"{row['shift_max']} | {row['shift_rms_vs_base']} | {row['agree_float32']} | "
            f"{row['agree_base']} | {row['agree_float32_stable']} | {row['agree_base_stable']} "
            f"| {len(row['flips_float32'])} | {row['expected_flips_float32']} | {len(fb)} | "
            f"{detail or '-'} | {_tau99(row['recheck'])} |")
    return lines


def _tau99(rc: dict) -> str:
    tau = rc["tau99"]
    return "none" if tau is None else f"{tau} ({rc['taus'][str(tau)]['reasked']})"


def markdown(r: dict) -> str:
    lines = [f"# fp8 on trained weights, per decision: margins and their shifts ({r['date']})",
             "", f"Command: `{r['command']}`; {r['seconds']} s on {r['machine']}, `uptime` load "
             f"average {r['load_before']} before, {r['load_after']} after.", ""]
    reused = r.get("reused")
    while reused:  # the runs this one continued, latest first
        lines += [f"Read from `{reused['path']}`: {', '.join(reused['variants'])} (and its "
                  f"sensitivity, if any), written by `{reused['command']}` ({reused['seconds']}"
                  f" s, load {reused['load_before']} before, {reused['load_after']} after).",
                  ""]
        reused = reused.get("earlier")
    if r.get("reused"):
        lines += ["Every margin those runs measured is in this result's JSON (`measured`), the "
                  "tables below are computed from it.", ""]
    lines += [
        f"Model {r['model']}, CPU emulation (bench/fp8_emulation.py, bench/fp8_margins.py). "
        "A decision is the sign of the margin the product reads: filter = the calibrated "
        "yes-no logit margin over the labelled reviews; pairs = PMI - threshold of the pair "
        "layout, either side as the document. Shift = variant margin - float32 margin. "
        "Model flips = sum of Phi(-|m32| / shift rms) over the set: the flips a Gaussian "
        "shift of that size would make. Shift rms for 99% = the rms at which that model gives "
        "1% flips. Re-ask band: the variant's decisions with |margin| < tau taken from the "
        "reference instead (fp8 first, the uncertain band asked again in bf16): the smallest "
        f"tau of {', '.join(map(str, TAUS))} that reaches 99% agreement, and the share of "
        "decisions it re-asks (tau chosen on the same set: an optimistic estimate).", "",
        "## |float32 margin|", "",
        "| set | decisions | min | 1% | 5% | 10% | 25% | median | 75% | 90% | max | spread "
        "(std) | shift rms for 99% |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    first = next(iter(r["analysis"].values()))
    for s in SETS:
        a = first.get(s)
        if not a:
            continue
        q = a["abs_margin"]
        lines.append(f"| {s} | {a['decisions']} | " + " | ".join(str(q[f'q{round(x * 100)}'])
                                                             for x in QUANTILES)
                     + f" | {a['margin_spread']} | {a['rms_shift_for_99']} |")
    for s in SETS:
        if s not in first:
            continue
        lines += ["", f"## {s}", ""]
        if first[s].get("reference"):
            lines += ["The content-free prompt's own margin (subtracted from every review's): "
                      + ", ".join(f"{v} {m}" for v, m in first[s]["reference"].items()) + ".",
                      ""]
        for per_set in r["analysis"].values():
            lines += _variant_table(per_set[s], r["measured"]["float32"][s]["margins"]) + [""]
    sens = r.get("sensitivity")
    if sens:
        parts = [k for k in sens if k != "seconds"]
        lines += ["", "## Where the block scheme's filter shift comes from", "",
                  "One part in block fp8, the rest of the model float32; filter margins' shift "
                  f"from float32 ({sens['seconds']} s).", "",
                  "| part | " + " | ".join(parts) + " |",
                  "|---|" + "---:|" * len(parts)]
        for key, label in (("shift_rms", "shift rms"), ("shift_mean", "mean shift"),
                           ("flips_float32", "flips vs fp32")):
            lines.append(f"| {label} | " + " | ".join(str(sens[p][key]) for p in parts) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from bench.results_io import write_result

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS),
                    help=f"of {', '.join(VARIANTS + TRIES)}, fp8_block_bf16_layers_<i>_<j>...")
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--sensitivity", action="store_true",
                    help="also each layer and each projection kind alone in block fp8, the rest "
                         "float32, on the filter set: where the shift comes from")
    ap.add_argument("--reuse", default=None,
                    help="an earlier result of this suite: its variants are not run again")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    for v in args.variants:
        if v not in VARIANTS + TRIES and not v.startswith("fp8_block_bf16_layers_"):
            ap.error(f"unknown variant {v!r}")
    torch.manual_seed(0)
    start = time.perf_counter()
    load_before = round(os.getloadavg()[0], 2)
    measured: dict = {}
    reused = None
    if args.reuse:
        old = json.loads(open(args.reuse).read())
        measured = old["measured"]
        for m in measured.values():  # as measure() writes them now
            for part in SETS:
                if part in m:
                    m[part].pop("truth", None)
                    m[part]["margins"] = [round(x, 5) for x in m[part]["margins"]]
        reused = {"path": args.reuse, "command": old["command"], "variants": list(measured),
                  "seconds": old["seconds"], "load_before": old["load_before"],
                  "load_after": old["load_after"], "earlier": old.get("reused")}
    for variant in ("float32", "bf16", *args.variants):
        if variant not in measured:
            measured[variant] = measure(args.model, variant, tuple(args.sets))
    sensitivity = None
    if args.sensitivity:
        sensitivity = (old.get("sensitivity") if args.reuse else None) or \
            measure_sensitivity(args.model, measured["float32"]["filter"]["margins"])
    analysis = {base: {s: analyse({v: m[s]["margins"] for v, m in measured.items() if s in m},
                                  base=base) for s in args.sets}
                for base in BASES if base in measured}
    for per_set in analysis.values():
        if "filter" in per_set:
            per_set["filter"]["reference"] = {v: m["filter"]["reference"]
                                              for v, m in measured.items() if "filter" in m}
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(["python -m bench fp8-margins", *(argv or sys.argv[1:])]),
              "machine": f"{os.cpu_count()} vCPU, torch {torch.__version__}",
              "model": args.model, "load_before": load_before,
              "load_after": round(os.getloadavg()[0], 2),
              "seconds": round(time.perf_counter() - start, 1), "reused": reused,
              "analysis": analysis, "sensitivity": sensitivity, "measured": measured}
    write_result(result, "fp8-margins", markdown, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
