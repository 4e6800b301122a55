"""Does a row's answer depend on anything but the row? The same yes/no prompts through one
engine: twice as one batch, then in two halves, then shuffled; each row's margin compared with
the first run's, bitwise and by sign. Run it with prefix sharing on (the default: the second
run finds every prompt's KV in the engine's prefix cache) and off (`QUAIL_PREFIX_SHARING=0`:
every run computes every prompt afresh), so the two sources, the batch layout and the cached
KV, show apart.

On the GPU the engine is a GpuEngine over a random-weight model of `--shape` in fp8; with
`--device cpu` it is the embedded model (`--model`, trained weights) in `--dtype`.

    python -m bench.probes.determinism --tokenizer DIR [--prompts 400] [--out DIR]
    python -m bench.probes.determinism --device cpu [--model default] [--dtype bf16]
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path


def compare(first: list[float], other: list[float]) -> dict:
    return {"differing": sum(x != y for x, y in zip(first, other)),
            "max_abs": max(abs(x - y) for x, y in zip(first, other)),
            "sign_flips": sum((x > 0) != (y > 0) for x, y in zip(first, other))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probes.determinism")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--tokenizer", help="the GPU's random model's tokenizer directory")
    ap.add_argument("--shape", default="qwen3-4b")
    ap.add_argument("--model", default="default", help="the CPU's model spec")
    ap.add_argument("--dtype", default="bf16", help="the CPU's compute dtype")
    ap.add_argument("--min-tokens", type=int, default=200)
    ap.add_argument("--max-tokens", type=int, default=900)
    ap.add_argument("--prompts", type=int, default=400)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    from quail_engine.infer.api import BooleanReadout, Request
    from quail_engine.settings import prefix_sharing_enabled

    if args.device == "cuda":
        import torch

        from bench.gpu.common import random_gpu_model
        from quail_engine.infer.gpu.engine import GpuEngine
        from quail_engine.infer.tokenizer import load_tokenizer

        if not args.tokenizer:
            ap.error("--tokenizer is required on the GPU")
        config, model = random_gpu_model(args.shape, fp8=True)
        engine = GpuEngine(model, load_tokenizer(args.tokenizer), config, model_id="random")
        machine, model_name, precision = torch.cuda.get_device_name(0), args.shape, "fp8"
    else:
        from bench.results_io import machine as cpu_machine
        from quail_engine.infer.engine import LocalEngine

        engine = LocalEngine.load(args.model, device="cpu", dtype=args.dtype)
        machine, model_name, precision = cpu_machine(), args.model, args.dtype
    rng = random.Random(0)
    requests = [Request(tuple(rng.randrange(100, 40000)
                              for _ in range(rng.randrange(args.min_tokens, args.max_tokens))),
                        BooleanReadout()) for _ in range(args.prompts)]

    def margins(rows):
        return [a.margin for a in engine.run(rows)]

    first = margins(requests)
    again = margins(requests)
    half = args.prompts // 2
    halves = margins(requests[:half]) + margins(requests[half:])
    order = list(range(args.prompts))
    rng.shuffle(order)
    shuffled = [0.0] * args.prompts
    for k, m in zip(order, margins([requests[i] for i in order])):
        shuffled[k] = m
    result = {"machine": machine, "model": model_name, "precision": precision,
              "prefix_sharing": prefix_sharing_enabled(), "prompts": args.prompts,
              "median_abs_margin": sorted(map(abs, first))[args.prompts // 2],
              "same_batch_again": compare(first, again), "halves": compare(first, halves),
              "shuffled": compare(first, shuffled)}
    print(json.dumps(result))
    name = (f"determinism-{args.device}-{precision}-"
            f"{'sharing' if result['prefix_sharing'] else 'no-sharing'}.json")
    Path(args.out, name).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
