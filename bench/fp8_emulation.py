"""fp8 (e4m3) decisions on trained weights vs random weights, on the CPU by emulation.

The GPU check (tests/device/model_check.py) measures fp8 decision agreement on random weights
only (no checkpoint reaches the GPU machine): 88% on the Qwen3-4B shape, 96% on SmolLM2's.
This script asks whether that is the rounding of e4m3 itself or the random weights: it runs the
plain-torch CPU models with every layer projection computed the way the GPU path's fp8 GEMMs
compute it (activations quantized per token, weights per output channel, both to e4m3, the
product in float32) and compares TRUE/FALSE decisions with float32:

  * random-token prompts (as the GPU check: sign of logit[a] - logit[b] at the last token) on
    the trained SmolLM2-135M and Gemma-3-270M weights, and on random weights of SmolLM2's shape
    (which the GPU measured: the emulation should land near the device's 96%);
  * the product path on trained weights: the calibrated yes/no filter over the labelled
    reviews (tests/data + bench/data), decisions and accuracy.

    python -m bench fp8-emulation     # writes bench/results/cpu-fp8-emulation-<date>.json|md
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys

import torch
from torch import nn

from bench.accuracy import DEV, FILTER_Q, load_rows
from bench.results_io import write_result
from quail_engine.infer.gpu.linear import quantize_rows

FP8 = torch.float8_e4m3fn
PROJECTIONS = {"all": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                       "down_proj"),
               "mlp": ("gate_proj", "up_proj", "down_proj")}


def e4m3(x: torch.Tensor) -> torch.Tensor:
    """x [..., K] rounded through e4m3 with one scale per row of K, by the GPU path's own
    quantizer (quail_engine/infer/gpu/linear.quantize_rows)."""
    q, scale = quantize_rows(x.reshape(-1, x.shape[-1]))
    return (q.float() * scale[:, None]).reshape(x.shape)


def e4m3_blocks(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """x [..., R, C] rounded through e4m3 with one scale per (rows x cols) block (DeepSeek-V3
    style: 1 x 128 for activations, 128 x 128 for weights); R, C padded to whole blocks."""
    *lead, r, c = x.shape
    pr, pc = -r % rows, -c % cols
    xp = torch.nn.functional.pad(x, (0, pc, 0, pr))
    blocks = xp.reshape(*lead, (r + pr) // rows, rows, (c + pc) // cols, cols)
    scale = blocks.abs().amax(dim=(-3, -1), keepdim=True).clamp_min(1e-12) / 448.0
    q = (blocks / scale).clamp(-448.0, 448.0).to(FP8).float() * scale
    return q.reshape(*lead, r + pr, c + pc)[..., :r, :c]


class Fp8Linear(nn.Module):
    """y = e4m3(x) @ e4m3(W)^T in float32. Scales: per token x per output channel (what
    GpuLinear does), or `block`: 1 x 128 activation groups and 128 x 128 weight blocks."""

    def __init__(self, linear: nn.Linear, block: bool = False):
        super().__init__()
        w = linear.weight.detach().float()
        self.block = block
        self.weight = nn.Parameter(e4m3_blocks(w, 128, 128) if block else e4m3(w),
                                   requires_grad=False)
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xq = e4m3_blocks(xf.unsqueeze(-2), 1, 128).squeeze(-2) if self.block else e4m3(xf)
        y = xq @ self.weight.t()
        if self.bias is not None:
            y = y + self.bias.float()
        return y.to(x.dtype)


class Fp8SeqScaledO(Fp8Linear):
    """o_proj fed as the GPU path feeds it when a pass has no resident prefix: the attention
    output quantized with one scale per token, max |v| over the token's sequence / 448
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


def emulate_fp8(model: nn.Module, which: str, block: bool = False,
                o_seq_scale: bool = False) -> int:
    """Swap the named projections of every layer for Fp8Linear (o_proj for Fp8SeqScaledO when
    `o_seq_scale`; it comes after v_proj, so its hook sees the fp8 V); returns how many."""
    names = PROJECTIONS[which]
    swapped = 0
    for module in list(model.modules()):
        for name in names:
            child = getattr(module, name, None)
            if isinstance(child, nn.Linear):
                wrapped = (Fp8SeqScaledO(child, module) if o_seq_scale and name == "o_proj"
                           else Fp8Linear(child, block))
                setattr(module, name, wrapped)
                swapped += 1
    if not swapped:
        raise ValueError(f"no {names} projections found in {type(model).__name__}")
    return swapped


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


def compare(ref: torch.Tensor, got: torch.Tensor) -> dict:
    agree = (ref > 0) == (got > 0)
    return {"agreement": round(float(agree.float().mean()), 4), "flips": int((~agree).sum()),
            "n": int(ref.numel()), "margin_mean_abs_err": round(float((ref - got).abs().mean()), 4),
            "margin_std_ref": round(float(ref.std()), 4),
            "noise_to_spread": round(float((ref - got).std() / ref.std()), 4)}


# fp8: the GPU path (O input scaled per sequence, see Fp8SeqScaledO); fp8_o_rowscale: every
# projection input scaled per row (the GPU path before session 3, and its prefix rows now)
VARIANTS = ("float32", "bf16", "fp8", "fp8_o_rowscale", "fp8_mlp_only", "fp8_block128")


def _emulate(model: nn.Module, variant: str) -> None:
    if variant.startswith("fp8"):
        emulate_fp8(model, "mlp" if variant == "fp8_mlp_only" else "all",
                    block=variant == "fp8_block128", o_seq_scale=variant == "fp8")


def _variant_model(model: nn.Module, variant: str) -> nn.Module:
    if variant == "bf16":
        return model.to(torch.bfloat16)
    _emulate(model, variant)
    return model


def trained(spec: str, num_prompts: int) -> dict:
    from bench import ask
    from quail_engine.infer.engine import LocalEngine

    reviews, _ = load_rows()
    dev, _ = load_rows(DEV)
    texts = [r["text"] for r in reviews + dev]
    truth = [r["sentiment"] == "positive" for r in reviews + dev]
    out: dict = {"reviews": len(texts)}
    ref_m = ref_f = None
    for variant in VARIANTS:
        # a fresh engine per variant: no KV or answers carried over
        engine = LocalEngine.load(spec, "cpu", "bf16" if variant == "bf16" else "float32")
        _emulate(engine.model, variant)
        prompts = random_prompts(num_prompts, engine.config.vocab_size)
        m = margins(engine.model, prompts, (1000, 2000))
        answers = ask.ask_boolean(engine, texts, FILTER_Q)
        f = torch.tensor([a.value for a in answers])
        row = {"filter_accuracy": round(float((f == torch.tensor(truth)).float().mean()), 4)}
        if ref_m is None:
            ref_m, ref_f = m, f
        else:
            row["random_prompts"] = compare(ref_m, m)
            row["filter_decisions_agree"] = round(float((f == ref_f).float().mean()), 4)
        out[variant] = row
    return out


def random_shape(shape: str, num_prompts: int) -> dict:
    from bench.random_weights import random_state_dict, shape_config
    from quail_engine.infer.models import build_model

    config = shape_config(shape)
    sd = random_state_dict(config, seed=0)
    prompts = random_prompts(num_prompts, config.vocab_size)
    out: dict = {}
    ref = None
    for variant in VARIANTS:
        model = build_model(config)
        model.load_state_dict(sd, strict=False)
        model = _variant_model(model.eval(), variant)
        m = margins(model, prompts, (1000, 2000))
        if ref is None:
            ref = m
        else:
            out[variant] = compare(ref, m)
    return out


def markdown(r: dict) -> str:
    lines = [f"# fp8 emulation on the CPU ({r['date']})", "", f"Command: `{r['command']}`", "",
             "Decision agreement with float32 (random-token prompts: sign of logit[1000] - "
             "logit[2000]; filter: calibrated yes/no over the labelled reviews).", "",
             "| weights | variant | random-prompt agreement | noise / margin spread | "
             "filter decisions agree | filter accuracy |", "|---|---|---:|---:|---:|---:|"]
    for name, res in r["trained"].items():
        for v in VARIANTS:
            row = res[v]
            rp = row.get("random_prompts", {})
            lines.append(f"| {name} (trained) | {v} | {rp.get('agreement', '-')} | "
                         f"{rp.get('noise_to_spread', '-')} | {row.get('filter_decisions_agree', '-')} "
                         f"| {row['filter_accuracy']} |")
    for name, res in r["random"].items():
        for v in VARIANTS[1:]:
            row = res[v]
            lines.append(f"| {name} (random) | {v} | {row['agreement']} | "
                         f"{row['noise_to_spread']} | - | - |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    ap.add_argument("--random-shapes", nargs="+", default=["smollm2-135m"])
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(["python -m bench fp8-emulation", *(argv or sys.argv[1:])]),
              "trained": {s: trained(s, args.prompts) for s in args.models},
              "random": {s: random_shape(s, args.prompts) for s in args.random_shapes}}
    write_result(result, "cpu-fp8-emulation", markdown, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
