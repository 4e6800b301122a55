"""Where a constrained decode step's host time goes: the overlapped loop's phases
(infer/decode_overlap.py: reading the step's tokens, the grammar helper's advance, the masks'
start, staging the next step, the masked choice) timed per step, free against constrained,
under one or more interpreter switch intervals (`sys.setswitchinterval`: how long a thread
holding the interpreter lock keeps it while another waits; the grammar helper and the decode
loop share it). A random-weight model of the GPU bench's shape with a carried tokenizer, the
prompts and schema of `python -m bench grammar`. Each mode runs once untimed and three times
timed (bench/grammar_decode.run_mode); phases are summed over all four and given per step.

    python -m bench.probes.grammar_phases --tokenizer DIR [--rows 1024] [--switch 0.005 0.0005]

Written in session 40 after the profile in bench/results/grammar-h100.md; not yet run on a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict


def _timed(totals, owner, name):
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[name] += time.perf_counter() - start

    setattr(owner, name, wrapper)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probes.grammar_phases")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--shape", default="qwen3-4b")
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--switch", type=float, nargs="+", default=[0.005])
    args = ap.parse_args(argv)

    import torch

    from bench.grammar_decode import REPEATS, SCHEMA, gpu_engine, reviews, run_mode
    from quail_engine.infer import decode_overlap
    from quail_engine.infer.api import Grammar

    totals: dict[str, float] = defaultdict(float)
    for name in ("_advance_early", "_start_masks", "_grammar_choices", "_next_rows", "_admit",
                 "_to_host"):
        _timed(totals, decode_overlap, name)
    engine, _ = gpu_engine(args.shape, args.tokenizer)
    for name in ("decode_stage", "decode_next"):
        _timed(totals, engine.runner, name)
    synchronize = torch.cuda.Event.synchronize

    def waited(event):  # the loop's wait for the step's tokens on the host
        start = time.perf_counter()
        synchronize(event)
        totals["tokens_ready_wait"] += time.perf_counter() - start

    torch.cuda.Event.synchronize = waited
    texts = reviews(args.rows)
    grammar = Grammar(json.dumps(SCHEMA, sort_keys=True))
    steps = (1 + REPEATS) * args.max_tokens
    for interval in args.switch:
        sys.setswitchinterval(interval)
        for mode, g in (("free", None), ("grammar", grammar)):
            totals.clear()
            row = run_mode(engine, texts, g, args.max_tokens, SCHEMA)
            print(json.dumps({"switch_interval": interval, "mode": mode,
                              "seconds": row["seconds"], "tokens_per_s": row["tokens_per_s"],
                              "mask_seconds": row["mask_seconds"],
                              "mask_wait_seconds": row["mask_wait_seconds"],
                              "per_step_ms": {k: round(1e3 * v / steps, 2)
                                              for k, v in sorted(totals.items())}}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
