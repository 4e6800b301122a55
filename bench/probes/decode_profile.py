"""Where a decode step's time goes: the engine's own decode loop (infer/decode.py) over `--rows`
prompts of ~`--prompt-tokens` tokens, once untimed (kernels compile), once timed with the GPU's
pass time beside the wall time, once under cProfile (the host's share by function) and a few
steps under torch.profiler (the GPU's share by kernel).

    python -m bench.probes.decode_profile --tokenizer DIR [--rows 1024] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import time
from pathlib import Path

PROFILED = range(20, 24)  # decode steps under torch.profiler
SYNCED = 4  # decode steps after those timed part by part (synchronizing around each part)


def _profile_steps(engine):
    """Patch the engine's runner so that decode steps PROFILED run under torch.profiler and the
    SYNCED steps after them are timed part by part: the forward's batch packing, the forward
    itself, the prefix extensions, the logits."""
    import torch

    from quail_engine.infer.gpu import batch as batch_mod
    from quail_engine.infer.gpu import model as model_mod

    runner = engine.runner
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                              torch.profiler.ProfilerActivity.CUDA])
    parts: dict[str, float] = {}
    state = {"step": 0, "timing": False}

    def timed(name, fn):
        def wrapper(*a, **k):
            if not state["timing"]:
                return fn(*a, **k)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            res = fn(*a, **k)
            torch.cuda.synchronize()
            parts[name] = parts.get(name, 0.0) + time.perf_counter() - t0
            return res
        return wrapper

    model = runner.model
    model_mod.pack_decode = timed("pack", batch_mod.pack_decode)
    model_mod.layer_attention = timed("attention", model_mod.layer_attention)
    model.decode = timed("decode forward (incl. pack)", model.decode)
    model.vocab_logits = timed("logits", model.vocab_logits)
    model.arena.grow = timed("grow", model.arena.grow)
    step_fn = runner.decode_step

    def patched(jobs):
        step = state["step"]
        state["step"] += 1
        if step == PROFILED.start:
            prof.start()
        state["timing"] = PROFILED.stop <= step < PROFILED.stop + SYNCED
        if state["timing"]:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if "end" in state:  # the host's loop between two steps (tokens chosen, seqs ended)
                # (SYNCED - 1 gaps: scaled to SYNCED for the per-step mean)
                parts["between steps"] = parts.get("between steps", 0.0) + \
                    (t0 - state["end"]) * SYNCED / (SYNCED - 1)
        res = step_fn(jobs)
        if state["timing"]:
            torch.cuda.synchronize()
            state["end"] = time.perf_counter()
            parts["step"] = parts.get("step", 0.0) + state["end"] - t0
        if step == PROFILED.stop - 1:
            torch.cuda.synchronize()
            prof.stop()
        return res
    runner.decode_step = patched
    return prof, parts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--shape", default="qwen3-4b")
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=300)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)

    import torch

    from bench.grammar_decode import gpu_engine
    from quail_engine.infer.api import GenerateReadout, Request

    out = Path(args.out)
    engine, _ = gpu_engine(args.shape, args.tokenizer)
    readout = GenerateReadout(max_tokens=args.max_tokens)
    base = list(range(1000, 1000 + args.prompt_tokens))
    # distinct prompts (no shared beginnings beyond the first token)
    requests = [Request(tuple([base[0] + i % 7000] + base[1:]), readout)
                for i in range(args.rows)]
    engine.run(requests[:64])
    torch.cuda.synchronize()
    result = {"rows": args.rows, "max_tokens": args.max_tokens,
              "prompt_tokens": args.prompt_tokens}
    stats = engine.stats
    prompts = args.rows * args.prompt_tokens
    # alternately, each twice: step by step, and overlapped (infer/decode_overlap.py), both
    # replaying the decode graphs
    for graphs, overlap in ((True, False), (True, True), (True, False), (True, True)):
        engine.runner.decode_graphs, engine.runner.decode_overlap = graphs, overlap
        engine.run(requests[:64])  # (a first step of each bucket captures its graph)
        torch.cuda.synchronize()
        before = (stats.gpu_pass_s, stats.decode_tokens, stats.forward_passes)
        start = time.perf_counter()
        engine.run(requests)
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
        row = {"graphs": graphs, "overlap": overlap, "wall_s": round(wall, 3),
               "gpu_pass_s": round(stats.gpu_pass_s - before[0], 3),
               "decode_tokens": stats.decode_tokens - before[1],
               "passes": stats.forward_passes - before[2],
               "tokens_per_s": round(args.rows * args.max_tokens / wall, 1),
               "prompt_tokens_total": prompts}
        result.setdefault("runs", []).append(row)
        print(json.dumps(row), flush=True)
    prof = cProfile.Profile()
    prof.enable()
    engine.run(requests)
    torch.cuda.synchronize()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(40)
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(60)
    (out / "decode_cprofile.txt").write_text(text.getvalue())
    engine.runner.decode_overlap = False  # (the parts below time `decode_step`)
    tp, parts = _profile_steps(engine)
    engine.run(requests)
    torch.cuda.synchronize()
    (out / "decode_kernels.txt").write_text(
        tp.key_averages().table(sort_by="cuda_time_total", row_limit=50))
    result["step_parts_ms"] = {k: round(v * 1000 / SYNCED, 2) for k, v in parts.items()}
    (out / "decode_profile.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
