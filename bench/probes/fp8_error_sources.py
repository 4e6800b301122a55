"""Where e4m3's decision flips come from on a trained model (CPU emulation, one model): each
side of the layer GEMMs rounded alone (weights per channel / in 128 x 128 blocks; activations
per token / in 1 x 128 groups / in 1 x 32 groups), and the block scheme with one projection kind
left in float32, against float32: random-prompt decision agreement and noise / margin spread,
and the calibrated filter over the labelled reviews.

    python -m bench.probes.fp8_error_sources [--model gemma3-270m] [--prompts 200]
    # writes bench/results/local/fp8-error-sources.json (or $OUT)
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn

from bench.accuracy import DEV, FILTER_Q, load_rows
from bench.fp8_emulation import e4m3, e4m3_weight_blocks, margins, random_prompts
from quail_kernels.block_fp8_gemm import quantize_groups_ref
from quail_testing.results import Results

ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def groups(x: torch.Tensor, size: int) -> torch.Tensor:
    flat = x.reshape(-1, x.shape[-1])
    q, scale = quantize_groups_ref(flat, size)
    full = scale.repeat_interleave(size, 1)[:, :flat.shape[1]]
    return (q.float() * full).reshape(x.shape)


ACTIVATIONS = {None: lambda x: x, "token": e4m3, "g128": lambda x: groups(x, 128),
               "g32": lambda x: groups(x, 32)}
WEIGHTS = {None: lambda w: w, "channel": e4m3, "block": e4m3_weight_blocks}
# name -> (activation rounding, weight rounding, projections left in float32)
CASES = {"weights_channel": (None, "channel", ()), "weights_block": (None, "block", ()),
         "acts_token": ("token", None, ()), "acts_g128": ("g128", None, ()),
         "acts_g32": ("g32", None, ()), "block": ("g128", "block", ()),
         "block_keep_o": ("g128", "block", ("o_proj",)),
         "block_keep_down": ("g128", "block", ("down_proj",)),
         "block_keep_qkv": ("g128", "block", ("q_proj", "k_proj", "v_proj")),
         "g32_block": ("g32", "block", ())}


class Rounded(nn.Module):
    def __init__(self, linear: nn.Linear, act, weight):
        super().__init__()
        self.act = ACTIVATIONS[act]
        self.weight = nn.Parameter(WEIGHTS[weight](linear.weight.detach().float()),
                                   requires_grad=False)

    def forward(self, x):
        return (self.act(x.float()) @ self.weight.t()).to(x.dtype)


def apply(model: nn.Module, act, weight, keep: tuple[str, ...]) -> None:
    for module in list(model.modules()):
        for name in ALL:
            child = getattr(module, name, None)
            if isinstance(child, nn.Linear) and name not in keep:
                setattr(module, name, Rounded(child, act, weight))


def run(spec: str, num_prompts: int) -> dict:
    from quail_engine.infer.engine import LocalEngine
    from quail_testing import ask

    reviews, _ = load_rows()
    dev, _ = load_rows(DEV)
    texts = [r["text"] for r in reviews + dev]
    out: dict = {"model": spec, "prompts": num_prompts, "reviews": len(texts),
                 "load_before": round(os.getloadavg()[0], 2)}
    ref = None
    for case in ("float32", *CASES):
        start = time.perf_counter()
        engine = LocalEngine.load(spec, "cpu", "float32")
        if case != "float32":
            apply(engine.model, *CASES[case])
        m = margins(engine.model, random_prompts(num_prompts, engine.config.vocab_size),
                    (1000, 2000))
        f = torch.tensor([bool(a.value) for a in ask.ask_boolean(engine, texts, FILTER_Q)])
        if ref is None:
            ref = (m, f)
            continue
        out[case] = {"random_agree": round(float(((m > 0) == (ref[0] > 0)).float().mean()), 4),
                     "noise_to_spread": round(float((m - ref[0]).std() / ref[0].std()), 4),
                     "filter_agree": round(float((f == ref[1]).float().mean()), 4),
                     "seconds": round(time.perf_counter() - start, 1)}
    out["load_after"] = round(os.getloadavg()[0], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--prompts", type=int, default=200)
    args = ap.parse_args(argv)
    res = Results("fp8-error-sources.json")
    res.section("result", run, args.model, args.prompts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
