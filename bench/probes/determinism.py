"""Does a row's answer on the GPU depend on anything but the row? The same yes/no prompts
through one GpuEngine (random-weight model of `--shape`, fp8): twice as one batch, then in
two halves, then shuffled; each row's margin compared with the first run's, bitwise and by
sign. Run it with prefix sharing on (the default: the second run finds every prompt's KV in
the engine's prefix cache) and off (`QUAIL_PREFIX_SHARING=0`: every run computes every
prompt afresh), so the two sources, the batch layout and the cached KV, show apart.

    python -m bench.probes.determinism --tokenizer DIR [--prompts 400] [--out DIR]
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
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--shape", default="qwen3-4b")
    ap.add_argument("--prompts", type=int, default=400)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    import torch

    from bench.gpu.common import random_gpu_model
    from quail_engine.infer.api import BooleanReadout, Request
    from quail_engine.infer.gpu.engine import GpuEngine
    from quail_engine.infer.tokenizer import load_tokenizer
    from quail_engine.settings import prefix_sharing_enabled

    config, model = random_gpu_model(args.shape, fp8=True)
    engine = GpuEngine(model, load_tokenizer(args.tokenizer), config, model_id="random")
    rng = random.Random(0)
    requests = [Request(tuple(rng.randrange(100, 40000) for _ in range(rng.randrange(200, 900))),
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
    result = {"gpu": torch.cuda.get_device_name(0), "shape": args.shape, "precision": "fp8",
              "prefix_sharing": prefix_sharing_enabled(), "prompts": args.prompts,
              "median_abs_margin": sorted(map(abs, first))[args.prompts // 2],
              "same_batch_again": compare(first, again), "halves": compare(first, halves),
              "shuffled": compare(first, shuffled)}
    print(json.dumps(result))
    name = f"determinism-{'sharing' if result['prefix_sharing'] else 'no-sharing'}.json"
    Path(args.out, name).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
