"""Answer quality of the embedded candidates on tests/data/reviews_labelled.jsonl.

For each model (gemma3-270m base, smollm2-135m instruct) and each readout mode (raw, calibrated
with the content-free "N/A" document):
  filter:    "Is this review positive?" yes/no, truth = sentiment == positive
  classify:  labels positive / negative
  knowledge: yes/no world-knowledge questions (reported only; small models are near chance)
Prompts are the engine's fixed layouts (quail_engine/infer/prompt_layout.py); nothing is tuned to this set.

    python -m bench accuracy        # writes bench/results/accuracy.json|md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

from bench.results_io import write_result

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "reviews_labelled.jsonl"
DEV = ROOT / "bench" / "data" / "dev_reviews.jsonl"   # layout choices were made on this set
FILTER_Q = "Is this review positive?"
CLASSIFY_TASK = "Classify the sentiment of the review."
KNOWLEDGE_Q = "Answer the question truthfully."
LABELS = ("positive", "negative")


def load_rows(path: Path = DATA) -> tuple[list[dict], list[dict]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["kind"] == "review"], [r for r in rows if r["kind"] == "fact"]


def score(predicted: list, truth: list) -> dict:
    right = sum(p == t for p, t in zip(predicted, truth))
    return {"accuracy": round(right / len(truth), 4), "n": len(truth),
            "predicted_counts": {str(k): predicted.count(k) for k in sorted(set(predicted), key=str)}}


def evaluate(engine, reviews: list[dict], facts: list[dict]) -> dict:
    from quail_testing import ask

    texts = [r["text"] for r in reviews]
    is_pos = [r["sentiment"] == "positive" for r in reviews]
    out = {}
    for mode, cal in (("raw", False), ("calibrated", True)):
        start = time.perf_counter()
        f = ask.ask_boolean(engine, texts, FILTER_Q, calibrate=cal)
        c = ask.classify(engine, texts, LABELS, CLASSIFY_TASK, calibrate=cal)
        k = ask.ask_boolean(engine, [r["question"] for r in facts], KNOWLEDGE_Q, calibrate=cal)
        out[mode] = {
            "filter": score([a.value for a in f], is_pos),
            "classify": score([a.value for a in c], [r["sentiment"] for r in reviews]),
            "knowledge": score([a.value for a in k], [r["truth"] for r in facts]),
            "seconds": round(time.perf_counter() - start, 2),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["gemma3-270m", "smollm2-135m"])
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    from quail_engine.infer.engine import LocalEngine
    from quail_testing import ask

    reviews, facts = load_rows()
    dev, _ = load_rows(DEV)
    results = {}
    for spec in args.models:
        engine = LocalEngine.load(spec, "cpu", args.dtype)
        head, tail = ask.prompt_split(engine, reviews[0]["text"], FILTER_Q)
        results[spec] = {"layout_example": engine.codec.decode_raw(head + tail),
                         **evaluate(engine, reviews, facts),
                         "dev": evaluate(engine, dev, facts[:1])}
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "command": "python " + " ".join(sys.argv), "dtype": args.dtype,
              "data": str(DATA.relative_to(ROOT)), "dev_data": str(DEV.relative_to(ROOT)),
              "questions": {"filter": FILTER_Q, "classify": CLASSIFY_TASK,
                            "knowledge": KNOWLEDGE_Q},
              "models": results}
    write_result(result, "accuracy", markdown, args.out)
    return 0


def markdown(r: dict) -> str:
    lines = [f"# Answer accuracy ({r['date']})", "", f"`{r['command']}` on {r.get('machine', 'a machine not recorded')} ({r['dtype']}, {r['data']})",
             "", "| model | mode | filter | classify | knowledge |", "|---|---|---:|---:|---:|"]
    for spec, res in r["models"].items():
        for mode in ("raw", "calibrated"):
            m = res[mode]
            lines.append(f"| {spec} | {mode} | {m['filter']['accuracy']:.3f} "
                         f"(n={m['filter']['n']}) | {m['classify']['accuracy']:.3f} | "
                         f"{m['knowledge']['accuracy']:.3f} (n={m['knowledge']['n']}) |")
    lines += ["", f"Development set ({r['dev_data']}), used to choose the layout:", "",
              "| model | mode | filter | classify |", "|---|---|---:|---:|"]
    for spec, res in r["models"].items():
        for mode in ("raw", "calibrated"):
            m = res["dev"][mode]
            lines.append(f"| {spec} | {mode} | {m['filter']['accuracy']:.3f} "
                         f"(n={m['filter']['n']}) | {m['classify']['accuracy']:.3f} |")
    lines += ["", "Prompt layouts (first review):", ""]
    for spec, res in r["models"].items():
        lines += [f"- {spec}:", "", "```", res["layout_example"], "```", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
