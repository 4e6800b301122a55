"""Constrained decoding's cost: the same batch decoded free and under a JSON schema.

Each of `--rows` reviews (examples/data/reviews.csv, repeated to the count) asks for a JSON
object; the batch is decoded by the engine's own decode loop (infer/decode.py) once untimed, then
three times timed (the median reported): free text, and under the schema (infer/grammar.py: llguidance masks, one
per step for all constrained rows), and under a short schema whose fields the grammar forces to
an end (an enum and a boolean: every answer completes). The rows report output tokens per
second, so modes that stop at different lengths compare per token, and the share of answers
that parse as the schema (an answer the grammar did not complete within the tokens is None).

- CPU (default): the embedded writer SmolLM2-135M, trained weights, float32.
- `--device cuda`: a random-weight model of `--shape` (default qwen3-4b, fp8) with the
  tokenizer in `--tokenizer DIR` (SmolLM2's: its 49,152 tokens inside the model's 151,936
  logits; the rest are never allowed). Random weights rarely end a string, so both modes decode
  every row to `--max-tokens`: the comparison is step for step.

    python -m bench grammar [--device cuda --tokenizer DIR] [--rows 64 ...] [--max-tokens 48]
                            [--out FILE]   # default bench/results/grammar-{cpu,gpu}.json
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import platform
import sys
import time
from pathlib import Path

from bench.results_io import write_result

REPEATS = 3  # timed runs per mode after the first; the median is reported
REVIEWS = Path(__file__).resolve().parents[1] / "examples" / "data" / "reviews.csv"
SCHEMA = {"type": "object", "additionalProperties": False,
          "required": ["product", "sentiment", "summary"],
          "properties": {"product": {"type": ["string", "null"]},
                         "sentiment": {"enum": ["positive", "negative", "mixed"]},
                         "summary": {"type": "string"}}}
# fields a grammar forces to an end (an enum, a boolean, a number): every answer completes and
# parses, even on random weights
SHORT = {"type": "object", "additionalProperties": False, "required": ["sentiment", "positive"],
         "properties": {"sentiment": {"enum": ["positive", "negative", "mixed"]},
                        "positive": {"type": "boolean"}}}
QUESTION = ("Extract a JSON object with the keys product, sentiment (positive, negative or "
            "mixed) and summary (a few words).")


def reviews(n: int, repeat: int = 1) -> list[str]:
    """`n` prompts' texts: the reviews in turn, each written `repeat` times (longer prompts)."""
    with open(REVIEWS, newline="") as f:
        texts = [r["review"] for r in csv.DictReader(f)]
    return ["\n".join([texts[i % len(texts)]] * repeat) for i in range(n)]


def cpu_engine():
    import torch

    from quail_engine.infer.engine import LocalEngine

    return LocalEngine.load("smollm2-135m", dtype=torch.float32), "smollm2-135m (float32)"


def gpu_engine(shape: str, tokenizer_dir: str):
    from bench.gpu.common import random_gpu_model
    from quail_engine.infer.gpu.engine import GpuEngine
    from quail_engine.infer.tokenizer import load_tokenizer

    config, model = random_gpu_model(shape, fp8=True)
    engine = GpuEngine(model, load_tokenizer(tokenizer_dir), config, model_id=f"random-{shape}")
    return engine, f"random {shape} (fp8), tokenizer of {Path(tokenizer_dir).name}"


def run_mode(engine, texts: list[str], grammar, max_tokens: int, schema: dict) -> dict:
    from quail_engine.infer.api import GenerateReadout, Request

    readout = GenerateReadout(max_tokens=max_tokens, grammar=grammar)
    requests = []
    for text in texts:
        head, tail = engine.chat_split(f"{text}\n\n{QUESTION}", "")
        requests.append(Request(tuple(head + tail), readout))
    timings = []
    masks = engine._grammar_masks()
    for _ in range(1 + REPEATS):  # the first run builds the grammar tokenizer, compiles kernels
        # (a grammar's forced first tokens are answer tokens, computed in the prompt's prefill)
        before = engine.stats.decode_tokens + engine.stats.forced_tokens
        masks.mask_s = masks.wait_s = 0.0
        start = time.perf_counter()
        answers = engine.run(requests)
        _sync()
        timings.append((time.perf_counter() - start,
                        engine.stats.decode_tokens + engine.stats.forced_tokens - before,
                        masks.mask_s, masks.wait_s))
    seconds, fed_back, mask_s, wait_s = sorted(timings[1:])[REPEATS // 2]  # the median run
    output = fed_back + len(requests)  # each row's last token is not fed back
    parsed = sum(_parses(a.value, schema) for a in answers)
    null = sum(a.value is None for a in answers)  # unfinished within the tokens: SQL NULL
    return {"rows": len(requests), "max_tokens": max_tokens, "output_tokens": output,
            "prompt_tokens": sum(len(r.tokens) for r in requests),
            "seconds": round(seconds, 3), "tokens_per_s": round(output / seconds, 1),
            "parses": round(parsed / len(requests), 3), "null": round(null / len(requests), 3),
            "mask_seconds": round(mask_s, 3), "mask_wait_seconds": round(wait_s, 3),
            "first_run_seconds": round(timings[0][0], 3)}


def profile_run(engine, texts: list[str], grammar, max_tokens: int, out: Path) -> None:
    """One more run of `texts` free and one under `grammar`, each with the host profiled by
    cProfile and the kernels by torch.profiler: where a constrained step's extra time goes.
    Besides the tables, each run's GPU busy time (the union of its kernels' intervals) and its
    longest idle gaps, which tell GPU work added from the GPU left waiting for the host."""
    text = io.StringIO()
    for label, g in (("free", None), ("grammar", grammar)):
        text.write(f"=== {label} ===\n")
        text.write(_profiled(engine, texts, g, max_tokens))
    out.write_text(text.getvalue())


def _profiled(engine, texts: list[str], grammar, max_tokens: int) -> str:
    import cProfile
    import pstats

    import torch

    from quail_engine.infer.api import GenerateReadout, Request

    readout = GenerateReadout(max_tokens=max_tokens, grammar=grammar)
    requests = [Request(tuple(sum(engine.chat_split(f"{t}\n\n{QUESTION}", ""), [])), readout)
                for t in texts]
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    host = cProfile.Profile()
    with torch.profiler.profile(activities=activities) as kernels:
        t0 = time.perf_counter()
        host.enable()
        engine.run(requests)
        _sync()
        host.disable()
        wall = time.perf_counter() - t0
    text = io.StringIO()
    text.write(f"wall {wall:.4f} s\n")
    if torch.cuda.is_available():
        text.write(gpu_busy(kernels.events(), wall) + "\n")
    stats = pstats.Stats(host, stream=text)
    stats.sort_stats("tottime").print_stats(30)
    # the decode loop's parts, callees included (cProfile sees every thread here: a call's
    # time includes its wait to take the interpreter lock back)
    stats.sort_stats("cumulative").print_stats("decode_overlap|decode_graph|runner|grammar", 25)
    stats.print_callees("stage|decode_stage|_advance_early|_start_masks|choose_on_device")
    sort = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
    text.write(kernels.key_averages().table(sort_by=sort, row_limit=30))
    return text.getvalue()


def gpu_busy(events, wall: float) -> str:
    """The GPU's busy seconds (the union of its kernels' and copies' intervals), the idle
    seconds between the first and last of them, and the ten longest idle gaps."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in events
                   if getattr(e, "device_type", None) is not None
                   and str(e.device_type).endswith("CUDA"))
    if not spans:
        return "gpu: no kernels recorded"
    busy, gaps, (lo, hi) = 0.0, [], spans[0]
    for start, end in spans[1:]:
        if start > hi:
            busy += hi - lo
            gaps.append(start - hi)
            lo, hi = start, end
        else:
            hi = max(hi, end)
    busy += hi - lo
    span = hi - spans[0][0]  # (hi: the latest end, the spans being sorted by start)
    longest = ", ".join(f"{g / 1e3:.2f}" for g in sorted(gaps, reverse=True)[:10])
    return (f"gpu: {len(spans)} kernel/copy intervals, busy {busy / 1e6:.4f} s of "
            f"{span / 1e6:.4f} s from first to last ({wall:.4f} s wall); idle gaps "
            f"{len(gaps)}, {sum(gaps) / 1e6:.4f} s; longest (ms): {longest}")


def _parses(text, schema) -> bool:
    if text is None:
        return False
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and set(value) == set(schema["properties"])


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def markdown(result: dict) -> str:
    lines = [f"# Constrained decoding vs free decoding ({result['date']})", "",
             f"Machine: {result['machine']}. Model: {result['model']}. Command: "
             f"`{result['command']}`.", "",
             "Masks: seconds computing the grammar masks (on a helper thread, during the forward "
             "pass) and seconds the decode loop waited for them.", "",
             "Under a grammar an answer parses as the schema or is NULL (unfinished within the "
             "tokens): parses + NULL = 1. A free answer is rarely the JSON asked for.", "",
             "| device | mode | rows | output tokens | seconds | tokens/s | parses as schema "
             "| NULL | masks s | waited s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['device']} | {r['mode']} | {r['rows']} | {r['output_tokens']} | "
                     f"{r['seconds']} | {r['tokens_per_s']} | {r['parses']} | {r['null']} | "
                     f"{r['mask_seconds']} | {r['mask_wait_seconds']} |")
    free = {r["rows"]: r["tokens_per_s"] for r in result["rows"] if r["mode"] == "free"}
    lines.append("")
    for r in result["rows"]:
        if r["mode"] == "grammar" and free.get(r["rows"]):
            lines.append(f"- {r['rows']} rows: under the grammar "
                         f"{r['tokens_per_s'] / free[r['rows']]:.2f}x the free tokens/s.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench grammar")
    p.add_argument("--device", default="cpu")
    p.add_argument("--rows", type=int, nargs="+", default=[64])
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--shape", default="qwen3-4b")
    p.add_argument("--tokenizer", help="tokenizer directory for --device cuda")
    p.add_argument("--repeat", type=int, default=1,
                   help="write each review this many times in its prompt (longer prompts)")
    p.add_argument("--modes", nargs="+", default=["free", "grammar", "grammar-short"],
                   choices=["free", "grammar", "grammar-short"])
    p.add_argument("--out", default=None)
    p.add_argument("--profile", metavar="FILE",
                   help="after the timed runs, run the last batch once more free and once under "
                        "the last mode's grammar, under cProfile and torch.profiler, and "
                        "write where their time went to FILE")
    args = p.parse_args(argv)
    from quail_engine.infer.api import Grammar

    if args.device == "cpu":
        engine, model = cpu_engine()
        machine = f"{platform.processor() or platform.machine()}, CPU"
    else:
        engine, model = gpu_engine(args.shape, args.tokenizer)
        import torch

        machine = torch.cuda.get_device_name(0)
    rows = []
    for count in args.rows:
        texts = reviews(count, args.repeat)
        schemas = {"free": None, "grammar": SCHEMA, "grammar-short": SHORT}
        for mode, schema in ((m, schemas[m]) for m in args.modes):
            g = None if schema is None else Grammar(json.dumps(schema, sort_keys=True))
            row = {"device": args.device, "mode": mode,
                   **run_mode(engine, texts, g, args.max_tokens, schema or SCHEMA)}
            rows.append(row)
            print(row, flush=True)
    if args.profile:
        profile_run(engine, texts, g, args.max_tokens, Path(args.profile))
    result = {"date": time.strftime("%Y-%m-%d"), "machine": machine, "model": model,
              "command": "python " + " ".join(sys.argv), "rows": rows}
    write_result(result, "grammar-cpu" if args.device == "cpu" else "grammar-gpu", markdown, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
