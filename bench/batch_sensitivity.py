"""How much a yes/no answer depends on the rows batched beside it, on the CPU engine.

The executor sizes its batches by the engine speed it measures (exec/op_runner.py,
BATCH_SECONDS), and the engine packs each batch into forward passes and shares the beginnings
the batch's rows have in common; so which rows share a forward pass, and where a row's KV is
split between a shared beginning and its own tokens, changes from run to run and between an
interrupted run's retry and an uninterrupted run. Mathematically a row's answer does not
depend on that; numerically it does. This bench answers the same prompts (the example reviews
times a few questions, calibrated as the product calibrates a filter) once in one engine call
(the packing a single batch gets) and then in seeded random batches of 3-60 prompts, and
counts the TRUE/FALSE decisions that flip and how far the margins move, per compute dtype and
with prefix sharing on and off.

    python -m bench.batch_sensitivity [--dtypes bfloat16,float32] [--rebatchings 2]
                                      [--out bench/results/batch-sensitivity.json]
"""

from __future__ import annotations

import argparse
import csv
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from bench.results_io import write_result

REVIEWS = Path(__file__).resolve().parents[1] / "examples" / "data" / "reviews.csv"
QUESTIONS = (
    "Is this review positive? ", "Does this review talk about the price? ",
    "Does the reviewer mention comfort? ", "Is the reviewer angry? ",
    "Does this review mention durability? ", "Would the reviewer buy again? ",
    "Is this review about shoes? ", "Does the review mention a refund? ")
NEAR = 0.05  # a margin this close to 0 is a near tie


def requests(engine) -> list:
    from quail_engine.infer.api import BooleanReadout, Request

    with REVIEWS.open() as f:
        reviews = [row["review"] for row in csv.DictReader(f)]
    out = []
    for question in QUESTIONS:
        calibration = tuple(sum(engine.chat_split(question, "N/A"), []))
        for review in reviews:
            out.append(Request(tuple(sum(engine.chat_split(question, review), [])),
                               BooleanReadout(calibration_tokens=calibration)))
    return out


def rebatched(engine, reqs: list, seed: int) -> list[float]:
    """Margins of `reqs` answered in a seeded random order, in batches of 3-60 prompts."""
    rng = random.Random(seed)
    order = list(range(len(reqs)))
    rng.shuffle(order)
    margins: list[float] = [0.0] * len(reqs)
    start = 0
    while start < len(order):
        part = order[start:start + rng.randint(3, 60)]
        start += len(part)
        for i, answer in zip(part, engine.run([reqs[i] for i in part])):
            margins[i] = answer.margin
    return margins


def cpu_engine(dtype: str, sharing: bool):
    """The embedded default model on the CPU engine in `dtype`, prefix sharing on or off."""
    from quail_engine.infer.engine import LocalEngine

    return LocalEngine.load("default", dtype=dtype, prefix_sharing=sharing)


def measure(engine, setting: dict, rebatchings: int) -> dict:
    """`setting` (dtype, prefix sharing) with the one-call and re-batched answers of `engine`."""
    reqs = requests(engine)
    t0 = time.perf_counter()
    reference = [a.margin for a in engine.run(reqs)]
    one_call_s = time.perf_counter() - t0
    runs = []
    for seed in range(1, rebatchings + 1):
        margins = rebatched(engine, reqs, seed)
        moved = [abs(a - b) for a, b in zip(reference, margins)]
        runs.append({"seed": seed,
                     "flips": sum((a > 0) != (b > 0) for a, b in zip(reference, margins)),
                     "median_moved": statistics.median(moved), "max_moved": max(moved)})
    return {**setting, "prompts": len(reqs),
            "near_ties": sum(abs(m) < NEAR for m in reference),
            "one_call_s": round(one_call_s, 2), "rebatchings": runs}


def _joined(runs: list[dict], key: str, spec: str) -> str:
    return ", ".join(format(r[key], spec) for r in runs)


def markdown(result: dict) -> str:
    lines = [f"# Batch sensitivity of yes/no answers, CPU engine ({result['date']})", "",
             f"`{result['command']}` on {result['machine']}; embedded default model; "
             f"{result['rows'][0]['prompts']} calibrated yes/no prompts (the example reviews x "
             f"{len(QUESTIONS)} questions) answered in one engine call, then in seeded random "
             "batches of 3-60 prompts. A flip: the decision differs from the one-call answer. "
             f"Near ties: one-call margins within {NEAR} of 0.", "",
             "| dtype | prefix sharing | near ties | one call s | flips per re-batching | "
             "median margin moved | max margin moved |", "|---|---|---:|---:|---|---|---|"]
    for row in result["rows"]:
        runs = row["rebatchings"]
        lines.append(
            f"| {row['dtype']} | {'on' if row['prefix_sharing'] else 'off'} | "
            f"{row['near_ties']} | {row['one_call_s']} | "
            f"{_joined(runs, 'flips', '')} | {_joined(runs, 'median_moved', '.2g')} | "
            f"{_joined(runs, 'max_moved', '.2g')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default="bfloat16,float32")
    parser.add_argument("--rebatchings", type=int, default=2)
    parser.add_argument("--out")
    from quail_engine.settings import affinity_cpus, cpuinfo_fields

    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    rows = [measure(cpu_engine(dtype, sharing), {"dtype": dtype, "prefix_sharing": sharing},
                    args.rebatchings)
            for dtype in args.dtypes.split(",") for sharing in (True, False)]
    result = {"date": time.strftime("%Y-%m-%d"), "rows": rows,
              "command": " ".join(["python -m bench.batch_sensitivity", *argv]),
              "machine": f"{cpuinfo_fields().get('model name') or platform.machine()}, "
                         f"{affinity_cpus()} CPUs visible"}
    write_result(result, "batch-sensitivity", markdown, args.out)


if __name__ == "__main__":
    main()
