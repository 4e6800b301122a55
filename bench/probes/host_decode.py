"""The overlapped decode loop's host work with the forward pass taken out: what the decode
loop (infer/decode_overlap.py) and the grammar machinery (infer/grammar.py: llguidance, its
helper thread) cost the host per step, free against constrained, on any CPU.

On a GPU the loop's chain per step (read the step's tokens, advance the grammars, bookkeeping,
admission, staging, the masked choice's launch) must fit inside the step's forward pass, or
the GPU waits. Here the runner's `decode_next` returns at once (a constant token, one-hot
logits), so the loop's wall time per step is that chain alone. The masked choice, a kernel on
the GPU, is stood in for by a numpy pick of each row's highest allowed token (timed apart, as
`stub_choice`); the grammar's masks are llguidance's own over the real tokenizer.

    python -m bench.probes.host_decode --tokenizer DIR [--rows 1024] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import torch

FREE_TOKEN = 1000


class HostOnly:
    """A runner with the GPU runner's decode interface whose passes cost nothing."""

    decode_overlap = True

    def __init__(self, width: int, rows: int):
        self.logits = torch.zeros((rows, width))
        self.logits[:, FREE_TOKEN] = 1.0  # (a prompt's first token, as the step's)
        self.stats = SimpleNamespace(decode_tokens=0, vain_decode_tokens=0)

    def decode_next(self, prefixes, ids, keep=(), staged=None):
        self.stats.decode_tokens += len(prefixes)
        return (torch.full((len(prefixes),), FREE_TOKEN, dtype=torch.long),
                self.logits[:len(keep)] if keep else None)

    def prefill(self, admitted):
        return [SimpleNamespace(kv=object(), logits=self.logits[:1]) for _ in admitted]


def _timed(totals, owner, name):
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[name] += time.perf_counter() - start

    setattr(owner, name, wrapper)
    return inner


def stub_choice(totals):
    """choose_on_device's host part (waiting for the masks, reading the matchers' accepting
    flags), then each row's highest allowed token by numpy in place of the GPU kernel."""

    def choose(self, logits, matchers, pending=None):
        t0 = time.perf_counter()
        parts = [p.result() for p in (pending if isinstance(pending, list) else [pending])]
        self.wait_s += time.perf_counter() - t0
        [m.is_accepting() for m in matchers]
        t1 = time.perf_counter()
        packed = np.concatenate([p.numpy() for p in parts]).view(np.uint32)
        nz = packed != 0
        last = packed.shape[1] - 1 - nz[:, ::-1].argmax(axis=1)
        word = packed[np.arange(len(packed)), last]
        bit = np.floor(np.log2(np.maximum(word, 1).astype(np.float64))).astype(np.int64)
        chosen = torch.from_numpy(last.astype(np.int64) * 32 + bit)
        totals["stub_choice"] += time.perf_counter() - t1
        return chosen

    return choose


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probes.host_decode")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    from bench.grammar_decode import SCHEMA
    from quail_engine.infer import decode, decode_overlap
    from quail_engine.infer.api import Grammar
    from quail_engine.infer.decode import DecodeSeq
    from quail_engine.infer.grammar import GrammarMasks
    from quail_engine.infer.tokenizer import load_tokenizer

    totals: dict[str, float] = defaultdict(float)
    for name in ("_advance_early", "_start_masks", "_grammar_choices", "_next_rows", "_admit",
                 "_to_host", "_count_vain"):
        _timed(totals, decode_overlap, name)
    take = _timed(totals, decode_overlap, "_take")
    decode._take = take  # (only the overlapped loop's calls are timed)
    GrammarMasks.choose_on_device = stub_choice(totals)

    tokenizer = load_tokenizer(args.tokenizer)
    width = tokenizer.vocab_size if hasattr(tokenizer, "vocab_size") else 49152
    width = ((width + 31) // 32) * 32
    grammars = GrammarMasks(tokenizer, [0])
    runner = HostOnly(width, args.rows)
    grammar = Grammar(json.dumps(SCHEMA, sort_keys=True))
    prompt = list(range(10, 60))
    for mode, g in (("free", None), ("grammar", grammar)):
        runs = []
        for _ in range(1 + args.repeats):
            totals.clear()
            grammars.mask_s = grammars.wait_s = 0.0
            seqs = [DecodeSeq(prompt, max_tokens=args.max_tokens, grammar=g)
                    for _ in range(args.rows)]
            before = runner.stats.decode_tokens
            cpu0, t0 = time.thread_time(), time.perf_counter()
            decode_overlap.overlapped_decode(runner, seqs, {0}, tokenizer.decode, grammars,
                                             prefill=runner.prefill)
            wall, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
            steps = max(len(s.out_tokens) for s in seqs)
            runs.append({"mode": mode, "rows": args.rows, "steps": steps,
                         "tokens": runner.stats.decode_tokens - before,
                         "finish": dict(sorted({f: sum(s.finish == f for s in seqs)
                                                for f in {s.finish for s in seqs}}.items())),
                         "ms_per_step": round(1e3 * wall / steps, 2),
                         "main_cpu_ms_per_step": round(1e3 * cpu / steps, 2),
                         "mask_ms_per_step": round(1e3 * grammars.mask_s / steps, 2),
                         "mask_wait_ms_per_step": round(1e3 * grammars.wait_s / steps, 2),
                         "phases_ms_per_step": {k: round(1e3 * v / steps, 2)
                                                for k, v in sorted(totals.items())}})
        runs.sort(key=lambda r: r["ms_per_step"])
        print(json.dumps(runs[len(runs[1:]) // 2]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
