"""The re-ask band for generated text: how far bf16 moves a decode step's choice, and whether
the band then gives the float32 reference's text.

A greedy answer is a chain of decisions, one per token. Given the same tokens so far, bf16 picks
float32's token wherever no other token comes within the largest shift bf16 makes to a logit
difference. Measured here teacher-forced: float32 writes each answer; both precisions then read
the prompt and that answer in one pass, and at every step, for the reference's token a and each
token t among either precision's 8 best, the shift of logit(a) - logit(t) is taken. The band is
SAFETY x the largest shift (bench/trust.py's rule), written to quail_engine/infer/bands.json as
the precision's `decode` width.

It is then checked on other prompts, through the engine's own decode loop: the 40 reviews of
examples/ (not the 100 the band was measured on), each asked two generation tasks; the texts of
plain bf16 and of bf16 with the band (infer/reask.ReaskingEngine) are compared with float32's.

    python -m bench decode_band [--models smollm2-135m gemma3-270m] [--max-tokens 32]
        [--no-write]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

from bench.results_io import write_result
from bench.trust import SAFETY

ROOT = Path(__file__).resolve().parent.parent
TASKS = ("Summarize this review in one sentence: {0}",
         "Write a short, polite reply to this customer review: {0}")
TOP = 8  # the tokens whose gap to the reference's choice is measured, per precision


def measured_reviews() -> list[str]:
    """The trust bench's 100 reviews (bench/data/trust.jsonl), each once."""
    rows = [json.loads(line) for line in (ROOT / "bench/data/trust.jsonl").read_text()
            .splitlines()]
    seen: dict[str, None] = {}
    for row in rows:
        seen.setdefault(row["values"][0], None)
    return list(seen)


def checked_reviews() -> list[str]:
    with open(ROOT / "examples/data/reviews.csv") as f:
        return [r["review"] for r in csv.DictReader(f)]


def prompts(engine, reviews: list[str]) -> list[tuple[int, ...]]:
    out = []
    for task in TASKS:
        for review in reviews:
            head, tail = engine.chat_split(task.replace("{0}", review), "")
            out.append(tuple(head + tail))
    return out


def generate(engine, token_lists, max_tokens: int):
    """(texts, answers' token ids) of `engine`'s greedy answers."""
    from quail_engine.infer.decode import DecodeSeq, greedy_decode

    seqs = [DecodeSeq(list(t), max_tokens=max_tokens) for t in token_lists]
    greedy_decode(engine.runner, seqs, engine.codec.eos_ids, engine.codec.decode)
    return [s.text for s in seqs], [s.out_tokens for s in seqs]


def step_logits(engine, prompt, answer):
    """[len(answer), vocab] float32 logits predicting each answer token, in one pass."""
    import torch

    from quail_engine.infer.runner import SeqJob

    tokens = list(prompt) + list(answer[:-1])
    job = SeqJob(tokens=tokens, read=tuple(range(len(prompt) - 1, len(tokens))))
    with torch.inference_mode():
        engine.runner.run([job])
    return job.logits.float()


def shifts(reference, fast) -> list[float]:
    """Per step: the largest change, fast vs reference, of logit(a) - logit(t), a the
    reference's choice and t any of either precision's TOP best tokens."""
    import torch

    a = reference.argmax(dim=-1, keepdim=True)
    cand = torch.cat([reference.topk(TOP, dim=-1).indices, fast.topk(TOP, dim=-1).indices], 1)
    ref_gap = reference.gather(1, a) - reference.gather(1, cand)
    fast_gap = fast.gather(1, a) - fast.gather(1, cand)
    return (fast_gap - ref_gap).abs().amax(dim=-1).tolist()


def measure(model: str, max_tokens: int) -> dict:
    import torch

    from quail_engine.infer.engine import LocalEngine

    ref = LocalEngine.load(model, dtype=torch.float32)
    fast = LocalEngine.load(model, dtype=torch.bfloat16)
    token_lists = prompts(ref, measured_reviews())
    _, answers = generate(ref, token_lists, max_tokens)
    steps: list[float] = []
    for prompt, answer in zip(token_lists, answers):
        if answer:
            steps += shifts(step_logits(ref, prompt, answer), step_logits(fast, prompt, answer))
    widest = max(steps)
    return {"prompts": len(token_lists), "steps": len(steps), "max_shift": round(widest, 4),
            "band": round(SAFETY * widest, 4)}


def check(model: str, band: float, max_tokens: int) -> list[dict]:
    """Agreement with float32's texts on the checked prompts: bf16 plain and with `band`."""
    import dataclasses

    import torch

    from quail_engine.infer.api import GenerateReadout, Request
    from quail_engine.infer.embedded import source_sha256
    from quail_engine.infer.engine import LocalEngine
    from quail_engine.infer.reask import ReaskingEngine, band_for

    readout = GenerateReadout(max_tokens=max_tokens)
    rows, texts = [], {}
    base = band_for(source_sha256(model), "bf16-cpu")
    for name in ("fp32", "bf16", "bf16-band"):  # (the band's row asks bf16 first, as measured)
        dtype = torch.float32 if name == "fp32" else torch.bfloat16
        engine = LocalEngine.load(model, dtype=dtype)
        token_lists = prompts(engine, checked_reviews())
        if name == "bf16-band":
            engine = ReaskingEngine(engine, lambda: LocalEngine.load(model, dtype=torch.float32),
                                    dataclasses.replace(base, decode=band, decode_direct=False))
        start = time.perf_counter()
        texts[name] = [a.value for a in engine.run([Request(t, readout) for t in token_lists])]
        seconds = time.perf_counter() - start
        agree = sum(a == b for a, b in zip(texts[name], texts.get("fp32", texts[name])))
        rows.append({"model": model, "precision": name, "prompts": len(token_lists),
                     "agreement": round(agree / len(token_lists), 4),
                     "reasked": round(getattr(engine, "reasked", 0) / len(token_lists), 4),
                     "seconds": round(seconds, 2)})
    return rows


def write_band(model: str, measured: dict, reasked: float, command: str) -> None:
    from bench.trust import machine
    from quail_engine.infer.embedded import embedded_name
    from quail_engine.infer.reask import BANDS_FILE

    data = json.loads(BANDS_FILE.read_text())
    entry = data["models"][embedded_name(model)]["bands"]["bf16-cpu"]
    entry["decode"] = measured["band"]
    # the band re-asked most answers: writing them all in float32 at once is the faster way
    entry["decode_direct"] = reasked > 0.5
    entry["decode_measured"] = {"max_shift": measured["max_shift"], "steps": measured["steps"],
                                "prompts": measured["prompts"], "measured_by": command,
                                "machine": machine(), "date": time.strftime("%Y-%m-%d")}
    BANDS_FILE.write_text(json.dumps(data, indent=1) + "\n")


def markdown(result: dict) -> str:
    lines = ["# Decode band (bf16 on the CPU vs the float32 reference)", "",
             f"Machine: {result['machine']}. Command: `{result['command']}`.", "",
             "Measured teacher-forced on the trust bench's 100 reviews x 2 tasks; checked "
             "through the decode loop on examples/data/reviews.csv's 40 reviews x 2 tasks "
             f"(max_tokens {result['max_tokens']}).", "",
             "| model | steps measured | max shift | band | written in float32 at once |",
             "|---|---|---|---|---|"]
    for m in result["bands"]:
        lines.append(f"| {m['model']} | {m['steps']} | {m['max_shift']} | {m['band']} | "
                     f"{'yes' if m['direct'] else 'no'} |")
    lines += ["", "| model | precision | prompts | texts equal to fp32 | re-asked | seconds |",
              "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['model']} | {r['precision']} | {r['prompts']} | {r['agreement']} | "
                     f"{r['reasked']:.0%} | {r['seconds']} |")
    lines += ["", "bf16-band asks bf16 first and re-asks the answers whose smallest step margin "
              "lies within the band; its seconds include loading the float32 engine on its "
              "first re-ask. Where it re-asked most answers, the band is written with "
              "`decode_direct` and the product writes generated text in float32 at once."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench decode_band", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--no-write", action="store_true",
                   help="measure and check without writing quail_engine/infer/bands.json")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    command = "python -m bench decode_band " + " ".join(argv)
    result = {"command": command.strip(), "max_tokens": args.max_tokens, "bands": [],
              "rows": []}
    for model in args.models:
        measured = measure(model, args.max_tokens)
        rows = check(model, measured["band"], args.max_tokens)
        reasked = next(r["reasked"] for r in rows if r["precision"] == "bf16-band")
        result["bands"].append({"model": model, **measured, "direct": reasked > 0.5})
        if not args.no_write:
            write_band(model, measured, reasked, command.strip())
        result["rows"] += rows
    write_result(result, "decode-band-cpu", markdown, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
