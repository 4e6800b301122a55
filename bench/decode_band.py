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
    on the H200 (trained weights: the GGUF files carried in parts, ../shared/facts.md):
    python -m bench decode_band --device cuda --precisions bf16 fp8 fp8-block \
        --models PATH.gguf ... --out $OUT/decode-band-gpu.json

A GPU precision's band is written under its bands.json key (bf16-cuda, fp8-cuda, ...) of the
model whose file has the same SHA-256 as an embedded one (infer/embedded.py names it).

`--kv-fp8` (GPU) adds a row per precision: its texts with the KV arena in fp8
(infer/gpu/paged_kv.py) against float32's, plain (the band was measured over a bf16 arena,
so no banded row is made for it and nothing of it is written):

    python -m bench decode_band --device cuda --precisions fp8 --kv-fp8 --no-write \
        --models PATH.gguf ... --out $OUT/decode-band-kv-gpu.json
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
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


KV_FP8 = "+kv-fp8"  # a row's precision suffix: the GPU engine's KV arena in fp8


def load(model: str, device: str, precision: str):
    """The plain engine of `model` at `precision` ("fp32": the float32 reference, on the GPU
    the plain-torch engine, as the band's re-asks use; "P+kv-fp8": P over an fp8 KV arena)."""
    import torch

    from quail_engine.infer.engine import LocalEngine
    from quail_engine.infer.factory import load_engine

    if precision == "fp32":
        return LocalEngine.load(model, device=device, dtype=torch.float32)
    if device == "cpu":
        return LocalEngine.load(model, device=device, dtype=torch.bfloat16)
    if precision.endswith(KV_FP8):
        return load_engine(model, device, precision.removesuffix(KV_FP8), kv_fp8=True)
    return load_engine(model, device, precision)


def measure(model: str, max_tokens: int, device: str, precision: str) -> dict:
    ref, fast = load(model, device, "fp32"), load(model, device, precision)
    token_lists = prompts(ref, measured_reviews())
    _, answers = generate(ref, token_lists, max_tokens)
    steps: list[float] = []
    for prompt, answer in zip(token_lists, answers):
        if answer:
            steps += shifts(step_logits(ref, prompt, answer), step_logits(fast, prompt, answer))
    widest = max(steps)
    return {"prompts": len(token_lists), "steps": len(steps), "max_shift": round(widest, 4),
            "band": round(SAFETY * widest, 4)}


def check(model: str, band: float, max_tokens: int, device: str, precision: str,
          key: str, kv_fp8: bool = False) -> list[dict]:
    """Agreement with float32's texts on the checked prompts: `precision` plain and with
    `band` (the precision's other widths from bands.json, or `band` for all); `kv_fp8`:
    also `precision` plain over an fp8 KV arena."""
    from quail_engine.infer.api import GenerateReadout, Request
    from quail_engine.infer.embedded import source_sha256
    from quail_engine.infer.reask import Band, ReaskingEngine, band_for

    readout = GenerateReadout(max_tokens=max_tokens)
    rows, texts = [], {}
    base = band_for(source_sha256(model), key) or Band(band, band, band)
    names = ("fp32", precision, f"{precision}-band") + ((precision + KV_FP8,) if kv_fp8 else ())
    for name in names:
        engine = load(model, device, name.removesuffix("-band"))
        token_lists = prompts(engine, checked_reviews())
        if name.endswith("-band"):  # (asks the fast precision first, as measured)
            engine = ReaskingEngine(engine, lambda: load(model, device, "fp32"),
                                    dataclasses.replace(base, decode=band, decode_direct=False))
        start = time.perf_counter()
        texts[name] = [a.value for a in engine.run([Request(t, readout) for t in token_lists])]
        seconds = time.perf_counter() - start
        agree = sum(a == b for a, b in zip(texts[name], texts.get("fp32", texts[name])))
        rows.append({"model": Path(model).name, "device": device, "precision": name,
                     "prompts": len(token_lists),
                     "agreement": round(agree / len(token_lists), 4),
                     "reasked": round(getattr(engine, "reasked", 0) / len(token_lists), 4),
                     "seconds": round(seconds, 2)})
    return rows


def write_band(model: str, key: str, measured: dict, reasked: float, command: str) -> bool:
    """Write the decode width into `key`'s band of the embedded model `model` is; False where
    `model` is no embedded model or has no band at `key` (measured but not written)."""
    from bench.trust import machine
    from quail_engine.infer.embedded import embedded_name, source_sha256
    from quail_engine.infer.reask import BANDS_FILE

    data = json.loads(BANDS_FILE.read_text())
    sha = source_sha256(model)
    entry = next((e["bands"].get(key) for e in data["models"].values()
                  if e["gguf_sha256"] == sha), None) if sha else None
    if entry is None:
        print(f"{model}: no {key} band in {BANDS_FILE} (python -m bench trust --bands first); "
              "the decode width is measured, not written", file=sys.stderr)
        return False
    entry["decode"] = measured["band"]
    # the band re-asked most answers: writing them all in float32 at once is the faster way
    entry["decode_direct"] = reasked > 0.5
    entry["decode_measured"] = {"max_shift": measured["max_shift"], "steps": measured["steps"],
                                "prompts": measured["prompts"], "measured_by": command,
                                "machine": machine(), "date": time.strftime("%Y-%m-%d"),
                                "model": embedded_name(model) or Path(model).name}
    BANDS_FILE.write_text(json.dumps(data, indent=1) + "\n")
    return True


def markdown(result: dict) -> str:
    lines = ["# Decode band (a fast precision's generated text vs the float32 reference)", "",
             f"Machine: {result['machine']}. Command: `{result['command']}`.", "",
             "Measured teacher-forced on the trust bench's 100 reviews x 2 tasks; checked "
             "through the decode loop on examples/data/reviews.csv's 40 reviews x 2 tasks "
             f"(max_tokens {result['max_tokens']}).", "",
             "| model | band key | steps measured | max shift | band | written in float32 at "
             "once |", "|---|---|---|---|---|---|"]
    for m in result["bands"]:
        lines.append(f"| {m['model']} | {m.get('key', 'bf16-cpu')} | {m['steps']} | "
                     f"{m['max_shift']} | {m['band']} | {'yes' if m['direct'] else 'no'} |")
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
    p.add_argument("--device", default="cpu")
    p.add_argument("--precisions", nargs="+", default=["bf16"],
                   help="fast precisions to measure (the GPU path's: bf16 fp8 fp8-block)")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--no-write", action="store_true",
                   help="measure and check without writing quail_engine/infer/bands.json")
    p.add_argument("--kv-fp8", action="store_true",
                   help="also each precision's texts over an fp8 KV arena (GPU only)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.kv_fp8 and not args.device.startswith("cuda"):
        p.error("--kv-fp8 needs the GPU engine's paged arena: --device cuda")
    from quail_engine.infer.factory import band_key

    command = ("python -m bench decode_band " + " ".join(argv)).strip()
    result = {"command": command, "max_tokens": args.max_tokens, "bands": [], "rows": []}
    device = "gpu" if args.device.startswith("cuda") else "cpu"
    start = time.perf_counter()
    for model in args.models:
        for precision in args.precisions:
            key = band_key(precision, args.device)
            measured = measure(model, args.max_tokens, args.device, precision)
            print(f"{Path(model).name} {precision}: measured {measured} at "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
            rows = check(model, measured["band"], args.max_tokens, args.device, precision, key,
                         args.kv_fp8)
            reasked = next(r["reasked"] for r in rows if r["precision"].endswith("-band"))
            written = not args.no_write and write_band(model, key, measured, reasked, command)
            result["bands"].append({"model": Path(model).name, "key": key, **measured,
                                    "direct": reasked > 0.5, "written": written})
            result["rows"] += rows
            print(f"{Path(model).name} {precision}: checked at "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
            # (after each precision: a run its time limit stops keeps what it finished)
            write_result(result, f"decode-band-{device}", markdown, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
