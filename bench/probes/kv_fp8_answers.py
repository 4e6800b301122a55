"""What the fp8 KV arena (QUAIL_KV_DTYPE=fp8) does to generated text on trained weights,
emulated on the CPU: the plain-torch engine in float32 with every key and value it stores for
later passes rounded through e4m3 with one scale per token and KV head (quail_kernels/kv_fp8.py,
the arena's own quantizer), against the same engine unrounded and against bf16.

The GPU arena rounds what it stores; a pass's own tokens attend over their unrounded keys and
values, and every later pass (each decode step, a question over a cached document) reads the
rounded ones. The emulation does the same: a hook on each layer's attention rounds the keys and
values it returns to be kept (infer/models/decoder.Attention), not the ones its pass attends
over. It differs in one place: a GPU decode step stores its token's key and value before
attending, so the token sees its own rounded; here it sees them unrounded.

Prompts: the trust bench's reviews (bench/data/trust.jsonl) asked for a one-sentence summary
through the model's chat layout, greedy, the embedded models' repetition penalty (the product's
default for them). Reported per variant: answers identical to float32's, to the unrounded run at
the same precision, and the mean token where an answer first differs from float32's.

    python -m bench.probes.kv_fp8_answers [--models smollm2-135m gemma3-270m] [--rows 60]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bench.probes.decode_trust import DATA, QUESTION, _first_difference


def round_stored_kv(model) -> int:
    """Hook every attention layer of `model` so the keys and values it returns for storage are
    rounded through e4m3 (per token and KV head) and back to their dtype; -> layers hooked."""
    from quail_engine.infer.models.decoder import Attention
    from quail_kernels.kv_fp8 import dequantize_kv, quantize_kv

    def rounded(x):
        return dequantize_kv(*quantize_kv(x)).to(x.dtype)

    def hook(module, args, out):
        attended, k, v = out
        return attended, rounded(k), rounded(v)

    layers = [m for m in model.modules() if isinstance(m, Attention)]
    for layer in layers:
        layer.register_forward_hook(hook)
    return len(layers)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    ap.add_argument("--rows", type=int, default=60)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)

    import torch

    from quail_engine.infer.api import GenerateReadout, Request
    from quail_engine.infer.embedded import EMBEDDED_REPETITION_PENALTY
    from quail_engine.infer.engine import LocalEngine

    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    texts = list(dict.fromkeys(r["values"][0] for r in rows))[:args.rows]
    result = {"date": time.strftime("%Y-%m-%d"), "rows": len(texts),
              "max_tokens": args.max_tokens, "torch": torch.__version__, "models": []}
    for name in args.models:
        runs = {}
        for variant, dtype, kv8 in (("float32", "float32", False),
                                    ("float32, fp8 KV", "float32", True),
                                    ("bf16", "bfloat16", False),
                                    ("bf16, fp8 KV", "bfloat16", True)):
            engine = LocalEngine.load(name, device="cpu", dtype=dtype)
            if kv8:
                round_stored_kv(engine.model)
            readout = GenerateReadout(max_tokens=args.max_tokens,
                                      repetition_penalty=EMBEDDED_REPETITION_PENALTY)
            reqs = []
            for text in texts:
                head, tail = engine.chat_split(f"{text}\n\n{QUESTION}", "")
                reqs.append(Request(tuple(head + tail), readout))
            start = time.perf_counter()
            with torch.inference_mode():
                runs[variant] = [a.value for a in engine.run(reqs)]
            seconds = time.perf_counter() - start
            encode = engine.codec.tokenizer.encode
            ref = runs["float32"]
            twin = runs[variant.split(",")[0]]
            diffs = [_first_difference(encode(g), encode(r)) for g, r in zip(runs[variant], ref)]
            row = {"model": name, "variant": variant,
                   "same_as_fp32": round(sum(g == r for g, r in zip(runs[variant], ref))
                                         / len(ref), 3),
                   "same_as_unrounded": round(sum(g == r for g, r in zip(runs[variant], twin))
                                              / len(ref), 3),
                   "mean_first_difference_token": round(sum(diffs) / len(diffs), 1),
                   "seconds": round(seconds, 1)}
            result["models"].append(row)
            print(json.dumps(row), flush=True)
        result.setdefault("examples", []).append(
            {"model": name, **{k: v[:2] for k, v in runs.items()}})
    Path(args.out, "kv-fp8-answers.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
