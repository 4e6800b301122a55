"""Where a constrained decode step's host time goes: the overlapped loop's phases
(infer/decode_overlap.py: reading the step's tokens, the grammar helper's advance, the masks'
start, staging the next step, the masked choice) timed per step, free against constrained,
under one or more interpreter switch intervals (`sys.setswitchinterval`: how long a thread
holding the interpreter lock keeps it while another waits; the grammar helper and the decode
loop share it). A random-weight model of the GPU bench's shape with a carried tokenizer, the
prompts and schema of `python -m bench grammar`. Each mode runs once untimed and three times
timed (bench/grammar_decode.run_mode); phases are summed over all four and given per step.

    python -m bench.probes.grammar_phases --tokenizer DIR [--rows 1024] [--switch 0.005 0.0005]
                                          [--gc default relaxed]

Each phase reports its wall time and the calling thread's CPU time (`time.thread_time`): a
phase whose wall time exceeds its CPU time waited (for the GPU, the interpreter lock, or the
helper thread). `helper_*` is the grammar helper thread's tasks (wall and CPU), `gc_*` the
cyclic collector's runs (counts and seconds, any thread), `loop_*` the whole decode per step.
`--gc relaxed` runs the decode under exec/gc_tuning.relaxed_gc's thresholds, as a statement
does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections import defaultdict


def _timed(totals, owner, name, label=None):
    inner = getattr(owner, name)
    label = label or name

    def wrapper(*args, **kwargs):
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[label] += time.perf_counter() - start
            totals[label + "_cpu"] += time.thread_time() - cpu

    setattr(owner, name, wrapper)


def _count_gc(totals):
    import gc

    began = []

    def callback(phase, info):
        if phase == "start":
            began.append(time.perf_counter())
        elif began:
            totals[f"gc{info['generation']}_s"] += time.perf_counter() - began.pop()
            totals[f"gc{info['generation']}_n"] += 1

    gc.callbacks.append(callback)


@contextlib.contextmanager
def _relaxed():
    """exec/gc_tuning.relaxed_gc's thresholds (not imported: quail_engine.exec needs duckdb,
    which the GPU machine lacks)."""
    import gc

    saved = gc.get_threshold()
    gc.set_threshold(100_000, *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def _time_helper(totals, grammars_cls):
    """Time the tasks the grammars' helper thread runs (their wall and its CPU time)."""
    helper = grammars_cls._helper

    def timed_helper(self):
        pool = helper(self)
        if not getattr(pool, "_quail_timed", False):
            submit = pool.submit

            def timed_submit(fn, *args, **kwargs):
                def run():
                    start, cpu = time.perf_counter(), time.thread_time()
                    try:
                        return fn(*args, **kwargs)
                    finally:
                        totals["helper"] += time.perf_counter() - start
                        totals["helper_cpu"] += time.thread_time() - cpu
                return submit(run)

            pool.submit, pool._quail_timed = timed_submit, True
        return pool

    grammars_cls._helper = timed_helper


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probes.grammar_phases")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--shape", default="qwen3-4b")
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--switch", type=float, nargs="+", default=[0.005])
    ap.add_argument("--gc", nargs="+", default=["default"], choices=["default", "relaxed"])
    args = ap.parse_args(argv)

    import torch

    from bench.grammar_decode import REPEATS, SCHEMA, gpu_engine, reviews, run_mode
    from quail_engine.infer import decode_overlap, engine_generation
    from quail_engine.infer.api import Grammar
    from quail_engine.infer.grammar import GrammarMasks

    totals: dict[str, float] = defaultdict(float)
    for name in ("_advance_early", "_start_masks", "_grammar_choices", "_next_rows", "_admit",
                 "_to_host"):
        _timed(totals, decode_overlap, name)
    _time_helper(totals, GrammarMasks)
    _count_gc(totals)
    engine, _ = gpu_engine(args.shape, args.tokenizer)
    for name in ("decode_stage", "decode_next"):
        _timed(totals, engine.runner, name)
    synchronize = torch.cuda.Event.synchronize

    def waited(event):  # the loop's wait for the step's tokens on the host
        start, cpu = time.perf_counter(), time.thread_time()
        synchronize(event)
        totals["tokens_ready_wait"] += time.perf_counter() - start
        totals["tokens_ready_wait_cpu"] += time.thread_time() - cpu

    torch.cuda.Event.synchronize = waited
    texts = reviews(args.rows)
    grammar = Grammar(json.dumps(SCHEMA, sort_keys=True))
    steps = (1 + REPEATS) * args.max_tokens
    _timed(totals, engine_generation, "overlapped_decode", "loop")
    for interval, collector in [(i, c) for i in args.switch for c in args.gc]:
        sys.setswitchinterval(interval)
        for mode, g in (("free", None), ("grammar", grammar)):
            totals.clear()
            with _relaxed() if collector == "relaxed" else contextlib.nullcontext():
                row = run_mode(engine, texts, g, args.max_tokens, SCHEMA)
            print(json.dumps({"switch_interval": interval, "gc": collector, "mode": mode,
                              "seconds": row["seconds"], "tokens_per_s": row["tokens_per_s"],
                              "mask_seconds": row["mask_seconds"],
                              "mask_wait_seconds": row["mask_wait_seconds"],
                              "per_step_ms": {k: round(1e3 * v / steps, 2)
                                              for k, v in sorted(totals.items())}}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
