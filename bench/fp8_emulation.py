"""fp8 (e4m3) schemes on trained weights, emulated on the CPU: decision agreement with bf16.

No checkpoint reaches the GPU machine, so what fp8 costs on trained weights is measured here: the
plain-torch CPU models with every layer projection computed the way the GPU path's fp8 GEMMs
compute it (inputs rounded through e4m3 with the GPU path's scales, the product in float32; the
rest of the model in float32), one scheme at a time:

  fp8           per-channel: weights one scale per output channel, activations one per token,
                the O projection's input one per sequence (max |v|, as the attention epilogue
                writes it; quail_kernels/varlen_attention.py) -- `--precision fp8`
  fp8_mlp_only  the same on gate/up/down only -- `--precision fp8-mlp`
  fp8_block     128 x 128 weight blocks, 1 x 128 activation groups on every projection (the O
                input too: gpu/model.py quantizes it in groups) -- `--precision fp8-block`, and
                the published FP8 checkpoints' scheme

against bf16 (the whole model in bfloat16: what the GPU path answers without fp8) and float32,
on the product's prompts: the calibrated yes/no filter over the labelled reviews (tests/data +
bench/data), the two-argument pair layout over tests/data/pairs_labelled.jsonl (both sides as
the document; the default model only, where the product uses that layout), and random-token
prompts (sign of logit[1000] - logit[2000] at the last token, as the GPU device check).

    python -m bench fp8-emulation     # writes bench/results/fp8-emulation.json|md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time

import torch
from torch import nn

from bench.accuracy import DEV, FILTER_Q, load_rows
from bench.results_io import write_result
from quail_engine.infer.gpu.linear import quantize_rows
from quail_kernels.block_fp8_gemm import quantize_blocks_ref, quantize_groups_ref

FP8 = torch.float8_e4m3fn
PROJECTIONS = {"all": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                       "down_proj"),
               "mlp": ("gate_proj", "up_proj", "down_proj")}
VARIANTS = ("float32", "bf16", "fp8", "fp8_mlp_only", "fp8_block")
EXTRA_VARIANTS = ("fp8_block_mlp_only",)  # on request (--variants)
PAIR_MODELS = ("default", "gemma3-270m")  # where the product asks pairs with the pair layout


def e4m3(x: torch.Tensor) -> torch.Tensor:
    """x [..., K] rounded through e4m3 with one scale per row of K, by the GPU path's own
    quantizer (quail_engine/infer/gpu/linear.quantize_rows)."""
    q, scale = quantize_rows(x.reshape(-1, x.shape[-1]))
    return (q.float() * scale[:, None]).reshape(x.shape)


def e4m3_groups(x: torch.Tensor, group: int = 128) -> torch.Tensor:
    """x [..., K] rounded through e4m3 in 1 x `group` groups (the fused epilogues' grouped
    scales: 128)."""
    flat = x.reshape(-1, x.shape[-1])
    q, scale = quantize_groups_ref(flat, group)
    k = flat.shape[1]
    full = scale.repeat_interleave(group, 1)[:, :k]
    return (q.float() * full).reshape(x.shape)


def e4m3_weight_blocks(w: torch.Tensor) -> torch.Tensor:
    """w [N, K] rounded through e4m3 in 128 x 128 blocks (a published FP8 checkpoint's)."""
    q, scale = quantize_blocks_ref(w)
    n, k = w.shape
    return q.float() * scale.repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]


class Fp8Linear(nn.Module):
    """y = e4m3(x) @ e4m3(W)^T in float32. Scales: per token x per output channel (what
    GpuLinear does per channel), or `block`: 1 x 128 activation groups and 128 x 128 weight
    blocks (`group`: the activation group width, 128 as on the GPU path)."""

    def __init__(self, linear: nn.Linear, block: bool = False, group: int = 128):
        super().__init__()
        w = linear.weight.detach().float()
        self.block = block
        self.group = group
        self.weight = nn.Parameter(e4m3_weight_blocks(w) if block else e4m3(w),
                                   requires_grad=False)
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        y = (e4m3_groups(xf, self.group) if self.block else e4m3(xf)) @ self.weight.t()
        if self.bias is not None:
            y = y + self.bias.float()
        return y.to(x.dtype)


class Fp8SeqScaledO(Fp8Linear):
    """o_proj fed as the per-channel GPU path feeds it when a pass has no resident prefix: the
    attention output quantized with one scale per token, max |v| over the token's sequence / 448
    (quail_kernels/varlen_attention.varlen_attention_fp8); with a prefix, per-row scales
    (lse_merge), as Fp8Linear. Reads the layer's batch layout and V through hooks."""

    def __init__(self, linear: nn.Linear, attention: nn.Module):
        super().__init__(linear)
        self.meta = self.v = None
        attention.register_forward_pre_hook(self._keep_meta)
        attention.v_proj.register_forward_hook(self._keep_v)

    def _keep_meta(self, module, args):
        self.meta = args[1]

    def _keep_v(self, module, args, out):
        self.v = out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        meta = self.meta
        if meta is None or any(p.num_tokens for p, _ in meta.prefix_groups):
            return super().forward(x)
        bounds = meta.cu_seqlens.tolist()
        scale = torch.ones(x.shape[0], 1)
        v = self.v.float().reshape(self.v.shape[0], -1)
        for start, end in zip(bounds[:-1], bounds[1:]):
            if end > start:
                scale[start:end] = v[start:end].abs().amax().clamp_min(1e-6) / 448.0
        xq = (x.float() / scale).clamp(-448.0, 448.0).to(FP8).float() * scale
        return (xq @ self.weight.t()).to(x.dtype)


def emulate_fp8(model: nn.Module, which: str, block: bool = False) -> int:
    """Swap the named projections of every layer for Fp8Linear (per channel: o_proj for
    Fp8SeqScaledO, as the GPU path; it comes after v_proj, so its hook sees the fp8 V); returns
    how many."""
    names = PROJECTIONS[which]
    swapped = 0
    for module in list(model.modules()):
        for name in names:
            child = getattr(module, name, None)
            if isinstance(child, nn.Linear):
                wrapped = (Fp8SeqScaledO(child, module) if not block and name == "o_proj"
                           else Fp8Linear(child, block))
                setattr(module, name, wrapped)
                swapped += 1
    if not swapped:
        raise ValueError(f"no {names} projections found in {type(model).__name__}")
    return swapped


def _emulate(model: nn.Module, variant: str) -> None:
    if variant.startswith("fp8"):
        emulate_fp8(model, "mlp" if variant.endswith("mlp_only") else "all",
                    block=variant.startswith("fp8_block"))


def random_prompts(n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(16, 160, (n,), generator=g).tolist()
    return [torch.randint(0, vocab, (length,), generator=g).tolist() for length in lengths]


def margins(model, prompts: list[list[int]], columns: tuple[int, int]) -> torch.Tensor:
    from quail_engine.infer.api import EngineStats
    from quail_engine.infer.runner import Runner, SeqJob
    from quail_engine.infer.scheduler import Scheduler

    jobs = [SeqJob(p, vocab=columns) for p in prompts]
    with torch.inference_mode():
        Runner(model, Scheduler(4096, 64), EngineStats(), "cpu").run(jobs)
    return torch.stack([j.logits[0, 0] - j.logits[0, 1] for j in jobs]).float()


def pair_answers(engine) -> tuple[list, list[bool]]:
    """(answers, truth) over every labelled pair, each asked with either side as the document,
    through the pair layout as the executor renders it (bench/pair_accuracy.py); an answer's
    `margin` is what its decision is read from (PMI - threshold > 0)."""
    from bench.pair_accuracy import PAIRS, ask, load_jsonl, pair_layout

    rows = load_jsonl(PAIRS)
    got, truth = [], []
    for anchor in ("a", "b"):
        for template in dict.fromkeys(r["template"] for r in rows):
            group = [r for r in rows if r["template"] == template]
            got += ask(engine, pair_layout(template, anchor), [(r["a"], r["b"]) for r in group])
            truth += [bool(r["label"]) for r in group]
    return got, truth


def pair_decisions(engine) -> tuple[list[bool], list[bool]]:
    """(decisions, truth) over every labelled pair (pair_answers)."""
    answers, truth = pair_answers(engine)
    return [bool(a.value) for a in answers], truth


def _agree(a, b) -> float:
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    return round(float(((a > 0) == (b > 0)).float().mean()), 4)


def _accuracy(got, truth) -> float:
    return round(sum(g == t for g, t in zip(got, truth)) / len(truth), 4)


def trained(spec: str, num_prompts: int, variants: tuple[str, ...] = VARIANTS) -> dict:
    from quail_engine.infer.engine import LocalEngine
    from quail_testing import ask

    reviews, _ = load_rows()
    dev, _ = load_rows(DEV)
    texts = [r["text"] for r in reviews + dev]
    truth = [r["sentiment"] == "positive" for r in reviews + dev]
    with_pairs = spec in PAIR_MODELS
    out: dict = {"reviews": len(texts)}
    raw: dict = {}
    for variant in variants:
        start = time.perf_counter()
        # a fresh engine per variant: no KV or answers carried over
        engine = LocalEngine.load(spec, "cpu", "bf16" if variant == "bf16" else "float32")
        _emulate(engine.model, variant)
        filt = [bool(a.value) for a in ask.ask_boolean(engine, texts, FILTER_Q)]
        m = margins(engine.model, random_prompts(num_prompts, engine.config.vocab_size),
                    (1000, 2000))
        pairs, pair_truth = pair_decisions(engine) if with_pairs else (None, None)
        raw[variant] = (filt, m, pairs)
        row = {"filter_accuracy": _accuracy(filt, truth)}
        if with_pairs:
            row["pair_accuracy"] = _accuracy(pairs, pair_truth)
            row["pairs"] = len(pairs)
        for ref in ("bf16", "float32"):
            if ref in raw and ref != variant:
                rf, rm, rp = raw[ref]
                row[f"vs_{ref}"] = {"filter": _agree(filt, rf), "random_prompts": _agree(m, rm),
                                    "random_noise_to_spread": round(float((m - rm).std()
                                                                          / rm.std()), 4)}
                if with_pairs:
                    row[f"vs_{ref}"]["pairs"] = _agree(pairs, rp)
        row["seconds"] = round(time.perf_counter() - start, 1)
        out[variant] = row
    return out


def markdown(r: dict) -> str:
    lines = [f"# fp8 schemes on trained weights, CPU emulation ({r['date']})", "",
             f"Command: `{r['command']}`; {r['seconds']} s on {r['machine']} (load average "
             f"{r['load_before']} before, {r['load_after']} after).", "",
             "Decision agreement with bf16 (the whole model in bfloat16) and with float32. "
             "fp8 variants: every GEMM input rounded through e4m3 with the GPU path's scales, "
             "the product and the rest of the model in float32 (bench/fp8_emulation.py). "
             "Filter: the calibrated yes/no question over the labelled reviews; pairs: the pair "
             "layout over tests/data/pairs_labelled.jsonl, either side as the document (default "
             "model only); random: sign of logit[1000] - logit[2000] after random-token "
             "prompts.", "",
             "| model | variant | filter agree bf16 | pairs agree bf16 | random agree bf16 | "
             "filter agree fp32 | pairs agree fp32 | filter accuracy | pair accuracy |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, res in r["trained"].items():
        n_f, n_p = res["reviews"], res.get("bf16", res.get("float32", {})).get("pairs")
        for v in r.get("variants", VARIANTS):
            row = res[v]
            vb, vf = row.get("vs_bf16", {}), row.get("vs_float32", {})
            lines.append(
                f"| {name} | {v} | {vb.get('filter', '-')} | {vb.get('pairs', '-')} | "
                f"{vb.get('random_prompts', '-')} | {vf.get('filter', '-')} | "
                f"{vf.get('pairs', '-')} | {row['filter_accuracy']} | "
                f"{row.get('pair_accuracy', '-')} |")
        lines.append(f"| {name} | (decisions) | {n_f} | {n_p or '-'} | {r['prompts']} | "
                     f"{n_f} | {n_p or '-'} | | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["gemma3-270m", "smollm2-135m"])
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS),
                    choices=VARIANTS + EXTRA_VARIANTS,
                    help="float32 and bf16 first: the others are compared with them")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    start = time.perf_counter()
    load_before = round(os.getloadavg()[0], 2)
    trained_results = {s: trained(s, args.prompts, tuple(args.variants)) for s in args.models}
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(["python -m bench fp8-emulation", *(argv or sys.argv[1:])]),
              "machine": f"{os.cpu_count()} vCPU, torch {torch.__version__}",
              "prompts": args.prompts, "variants": args.variants, "load_before": load_before,
              "load_after": round(os.getloadavg()[0], 2),
              "seconds": round(time.perf_counter() - start, 1), "trained": trained_results}
    write_result(result, "fp8-emulation", markdown, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
