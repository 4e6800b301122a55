"""fp8 attention (`--precision fp8-attn`) against the fp8 engine it extends, on the same random
Qwen3-4B-shape weights (fp8 GEMMs in both): long prompts whose own causal attention goes to the
library route (2-8k tokens), and join-shaped prompts (anchors of ~3,000 tokens, each followed
by many short partners: with prefix sharing the partners run as long segments over the anchor's
pages, the library's prefix route). Reported: TRUE/FALSE decision agreement and margin error
between the two, the noise floor (the fp8 engine against itself with the prompts packed in
another order), and both runs' seconds and fresh tokens. fp8 attention is documented as lossy:
the check fails only on a broken call (agreement under 80%), and its numbers are the record.

    PYTHONPATH=/tmp/site:. python tests/device/fp8_attention_check.py [--long 48 --anchors 12]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prefix_sharing_check import READOUT, IdTokenizer  # noqa: E402

from bench.random_weights import random_state_dict, shape_config  # noqa: E402
from quail_engine.infer.api import Request  # noqa: E402
from quail_engine.infer.gpu.attention import probe_cudnn  # noqa: E402
from quail_engine.infer.gpu.engine import GpuEngine, build_gpu_model  # noqa: E402


def prompts(vocab: int, long: int, anchors: int, partners: int, seed: int = 0):
    rng = random.Random(seed)
    tok = lambda n: [rng.randrange(3, vocab) for _ in range(n)]  # noqa: E731
    out = [tuple(tok(rng.randint(2048, 8192))) for _ in range(long)]
    for _ in range(anchors):
        anchor = tok(rng.randint(2500, 3500))
        out += [tuple(anchor + tok(rng.randint(40, 90))) for _ in range(partners)]
    return out


def run(engine, items) -> tuple[torch.Tensor, dict]:
    fresh0, t0 = engine.stats.fresh_tokens, time.perf_counter()
    answers = engine.run([Request(p, READOUT) for p in items])
    torch.cuda.synchronize()
    return torch.tensor([a.margin for a in answers]), {
        "seconds": round(time.perf_counter() - t0, 3),
        "fresh_tokens": engine.stats.fresh_tokens - fresh0}


def vs(ref: torch.Tensor, got: torch.Tensor) -> dict:
    agree = (ref > 0) == (got > 0)
    return {"decision_agreement": round(float(agree.float().mean()), 4),
            "flips": int((~agree).sum()),
            "margin_max_abs_err": round(float((ref - got).abs().max()), 4),
            "margin_mean_abs_err": round(float((ref - got).abs().mean()), 4)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen3-4b")
    ap.add_argument("--long", type=int, default=48)
    ap.add_argument("--anchors", type=int, default=12)
    ap.add_argument("--partners", type=int, default=64)
    args = ap.parse_args(argv)
    config = shape_config(args.shape)
    sd = random_state_dict(config, seed=0, device="cuda")
    model = build_gpu_model(config, sd, fp8=True, device="cuda", kv_fraction=0.3)
    del sd
    bf16_lib = model.lib_attention
    fp8_lib = probe_cudnn(model.device, config.num_heads, config.num_kv_heads, config.head_dim,
                          model.dtype, fp8=True)
    engine = GpuEngine(model, IdTokenizer(), config, prefix_sharing=True)
    items = prompts(config.vocab_size, args.long, args.anchors, args.partners)
    kinds = {"long": slice(0, args.long), "join": slice(args.long, len(items))}
    out = {"shape": args.shape, "prompts": len(items), "tokens": sum(map(len, items)),
           "fp8_output": "bf16" if fp8_lib.attend.out_bf16 else "e4m3"}
    with torch.inference_mode():
        for lib in (bf16_lib, fp8_lib):  # first shapes' plans outside the timed runs
            model.lib_attention = lib
            run(engine, items[:2] + items[args.long:args.long + args.partners])
            engine.prefix_cache.index.clear()
        model.lib_attention = bf16_lib
        ref, out["fp8_run"] = run(engine, items)
        engine.prefix_cache.index.clear()
        again, _ = run(engine, items[::-1])
        again = again.flip(0)
        engine.prefix_cache.index.clear()
        model.lib_attention = fp8_lib
        got, out["fp8_attn_run"] = run(engine, items)
        engine.prefix_cache.index.clear()
        got2, out["fp8_attn_run_again"] = run(engine, items)
        engine.prefix_cache.index.clear()
    for name, part in kinds.items():
        out[name] = {"fp8_attn_vs_fp8": vs(ref[part], got[part]),
                     "noise_floor_fp8_repacked": vs(ref[part], again[part]),
                     "margin_std": round(float(ref[part].std()), 4)}
    out["fp8_attn_vs_fp8"] = vs(ref, got)
    out["passed"] = out["fp8_attn_vs_fp8"]["decision_agreement"] >= 0.8
    print(json.dumps(out, indent=1))
    return 0 if out["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
