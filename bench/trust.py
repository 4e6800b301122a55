"""Trust bench: do the product's answers match the float32 reference, whatever the precision?

The 600 labelled prompts of bench/data/trust.jsonl (bench/trust_data.py: two yes/no filters,
two label sets and a two-table question over 100 reviews) are asked through the product's own
operator path (exec/op_runner.py with the layout exec/prompts.py gives each question) on the CPU
engine: in float32 (the reference), in bf16 in two batchings, and in bf16 with the re-ask band
(infer/reask.py). Each row reports agreement with the float32 decisions, accuracy against the
labels, the share of decisions re-asked and the seconds the answers took.

`--bands` also measures each readout kind's largest bf16 - float32 margin shift (both batchings,
and the first one's engine asked again, its prefix cache warm: matched prompt by prompt) and
writes SAFETY times it as the model's band to
quail_engine/infer/bands.json; the banded row then uses the band just written. Since that row is
in-sample, every run also checks the band on prompts it was not measured on (`holdout`: each
half of the prompts against a band from the other half's shifts).

    python -m bench trust [--models gemma3-270m smollm2-135m] [--bands]
                          [--out bench/results/trust.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from bench.results_io import write_result

DATA = Path(__file__).resolve().parent / "data" / "trust.jsonl"
RESULT = Path(__file__).resolve().parent / "results" / "trust.json"
SAFETY = 2.0  # band = SAFETY x the largest shift measured (the tail beyond 600 prompts)
BATCHES = (64, 7)  # prompts per batch of the two bf16 runs


class Recorder:
    """An engine wrapper that keeps, per full prompt (prefix tokens + own), the readout kind,
    margin and value of its answer."""

    def __init__(self, engine):
        from quail_engine.infer.reask import Band, ReaskingEngine

        # ReaskingEngine with an empty band tracks prefix tokens and re-asks nothing
        self._inner = ReaskingEngine(engine, lambda: None, Band(-1.0, -1.0, -1.0))
        self.seen: dict[tuple, tuple[str, float | None, object]] = {}

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def run(self, requests):
        answers = self._inner.run(requests)
        for r, a in zip(requests, answers):
            full = self._inner._full_tokens(r)
            self.seen[full] = (type(r.readout).__name__, a.margin, a.value)
        return answers


def questions():
    from bench.trust_data import QUESTIONS
    from quail_engine.sql.query import parse

    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    ops = {q: parse(sql, "snowflake").ai_ops[0] for q, sql in QUESTIONS.items()}
    return rows, ops


def decision(value):
    """A SQL value as a decision: a classification's JSON by its first label."""
    if isinstance(value, str) and value.startswith("{"):
        return json.loads(value)["labels"][0]
    return value


def ask(engine, model: str, rows: list[dict], ops: dict, batch: int) -> tuple[list, float]:
    """Every prompt's decision through the product's operator path, and the seconds taken."""
    from quail_engine.exec.answer_cache import AnswerCache
    from quail_engine.exec.model_quirks import pair_layout_for
    from quail_engine.exec.op_runner import OpRunner
    from quail_engine.exec.prompts import OpPrompt
    from quail_engine.exec.report import Report

    runner = OpRunner(engine, AnswerCache(None), Report(), batch_size=batch)
    out: list = [None] * len(rows)
    start = time.perf_counter()
    for n, (question, op) in enumerate(ops.items()):
        layout = OpPrompt.for_op(op, pair_layout_for(model))
        index = [i for i, r in enumerate(rows) if r["question"] == question]
        values = runner.answer(n, layout, [tuple(rows[i]["values"]) for i in index])
        for i, v in zip(index, values):
            out[i] = decision(v)
    return out, time.perf_counter() - start


def engines(model: str, dtype: str):
    from quail_engine.infer.engine import LocalEngine

    return LocalEngine.load(model, device="cpu", dtype=dtype)


def measure_bands(reference: dict, runs: list[dict]) -> dict:
    """Per readout kind, the largest |bf16 margin - float32 margin| over the runs."""
    shifts: dict[str, float] = {}
    counts: dict[str, int] = {}
    for run in runs:
        for full, (kind, margin, _) in run.items():
            ref = reference.get(full)
            if ref is None or margin is None or ref[1] is None:
                continue
            shifts[kind] = max(shifts.get(kind, 0.0), abs(margin - ref[1]))
            counts[kind] = counts.get(kind, 0) + 1
    return {"max_shift": {k: round(v, 4) for k, v in shifts.items()}, "matched": counts}


def holdout(reference: dict, runs: list[dict]) -> dict:
    """Whether a band measured on some prompts holds on others: the prompts split in two by
    a hash of their tokens, each half's band is SAFETY x the other half's largest shift per
    readout kind, and on each half a decision outside that band (not re-asked) that differs
    from float32's is a miss. `used`: the largest shift on a half over the other half's
    largest, per kind (above SAFETY, a miss was possible)."""
    import zlib

    halves: list[dict[str, list[tuple[float, float, bool]]]] = [{}, {}]
    for run in runs:
        for full, (kind, margin, value) in run.items():
            ref = reference.get(full)
            if ref is None or margin is None or ref[1] is None:
                continue
            half = zlib.crc32(repr(full).encode()) & 1
            halves[half].setdefault(kind, []).append(
                (abs(margin - ref[1]), abs(margin), value == ref[2]))
    misses, decisions, used = 0, 0, {}
    for half in (0, 1):
        other = halves[1 - half]
        for kind, got in halves[half].items():
            if not other.get(kind):
                continue
            widest = max(shift for shift, _, _ in other[kind])
            band = SAFETY * widest
            decisions += len(got)
            misses += sum(1 for _, margin, same in got if margin > band and not same)
            if widest > 0:
                used[kind] = round(max(used.get(kind, 0.0),
                                       max(shift for shift, _, _ in got) / widest), 3)
    return {"misses": misses, "decisions": decisions, "used": used}


def machine() -> str:
    """The CPU's model name and core count, and the GPU's name when torch sees one."""
    import os

    cpu = platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    out = f"{cpu}, {os.cpu_count()} cores"
    try:
        import torch

        if torch.cuda.is_available():
            out += f", {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    return out


def record_seconds(model: str, key: str, reference_s: float, banded_s: float) -> None:
    """The seconds the float32 reference and the banded precision took on these prompts, kept
    with the band unless an earlier measurement found the band slower relative to float32:
    `auto` on a CPU picks the banded precision only where it was the faster."""
    from quail_engine.infer.embedded import embedded_name
    from quail_engine.infer.reask import BANDS_FILE

    data = json.loads(BANDS_FILE.read_text())
    band = data["models"][embedded_name(model)]["bands"][key]
    kept = band.get("seconds")
    # (the band covers every machine measured, so `auto` takes it only where it was the
    # faster on each: an earlier machine's slower ratio stands)
    if kept is None or banded_s / reference_s >= kept["banded"] / kept["reference"]:
        band["seconds"] = {"reference": round(reference_s, 2), "banded": round(banded_s, 2)}
    BANDS_FILE.write_text(json.dumps(data, indent=1) + "\n")


def write_band(model: str, measured: dict, command: str, key: str) -> dict:
    """Write `model`'s band under `key` in bands.json: SAFETY x the largest shift per readout
    kind over this measurement and every earlier one kept there (`measurements`): the same
    precision on another CPU (other bf16 kernels) shifts margins otherwise, and a band must
    cover every machine it was measured on."""
    from quail_engine.infer.embedded import embedded_name, source_sha256
    from quail_engine.infer.reask import BANDS_FILE

    kinds = {"boolean": "BooleanReadout", "label": "LabelReadout", "span": "SpanReadout"}
    data = json.loads(BANDS_FILE.read_text()) if BANDS_FILE.exists() else {"models": {}}
    entry = data["models"].setdefault(embedded_name(model), {"gguf_sha256": source_sha256(model),
                                                          "bands": {}})
    old = entry["bands"].get(key, {})
    earlier = old.get("measurements") or ([{f: old[f] for f in (
        "max_shift", "matched", "measured_by", "machine", "date") if f in old}]
        if "max_shift" in old else [])
    now = {"max_shift": measured["max_shift"], "matched": measured["matched"],
           "measured_by": command, "machine": machine(), "date": time.strftime("%Y-%m-%d")}
    measurements = [m for m in earlier if m.get("machine") != now["machine"]] + [now]
    shifts: dict[str, float] = {}
    for m in measurements:
        for kind, shift in m["max_shift"].items():
            shifts[kind] = max(shift, shifts.get(kind, 0.0))
    widest = max(shifts.values())
    band = {k: round(SAFETY * shifts.get(name, widest), 4) for k, name in kinds.items()}
    # (the decode band is another suite's; the seconds, record_seconds' to update)
    kept = {k: v for k, v in old.items() if k.startswith("decode") or k == "seconds"}
    entry["bands"][key] = {**kept, **band, "max_shift": shifts, "safety": SAFETY,
                           "measurements": measurements}
    BANDS_FILE.write_text(json.dumps(data, indent=1) + "\n")
    return band


def run_model(model: str, bands: bool, command: str) -> tuple[list[dict], dict | None]:
    from quail_engine.infer.embedded import source_sha256
    from quail_engine.infer.factory import CPU_BAND
    from quail_engine.infer.reask import ReaskingEngine, band_for

    rows, ops = questions()
    labels = [r["label"] for r in rows]
    fp32 = Recorder(engines(model, "float32"))
    reference, reference_s = ask(fp32, model, rows, ops, 64)
    out = [_row(model, "fp32", False, reference, reference, labels, 0.0, reference_s,
                decisions=reference)]
    bf16_runs = []
    for batch in BATCHES:
        engine = engines(model, "bfloat16")
        bf16 = Recorder(engine)
        got, seconds = ask(bf16, model, rows, ops, batch)
        bf16_runs.append(bf16.seen)
        out.append(_row(model, "bf16", False, got, reference, labels, 0.0, seconds,
                        batch=batch))
        if batch == BATCHES[0]:
            # the same engine asked again: every prompt now continues KV its prefix cache
            # holds, so its answer is computed over cached keys (another route with other
            # roundings): the band must cover what a warm engine answers too
            warm = Recorder(engine)
            got, seconds = ask(warm, model, rows, ops, batch)
            bf16_runs.append(warm.seen)
            out.append(_row(model, "bf16", False, got, reference, labels, 0.0, seconds,
                            batch=batch, cache="warm"))
    measured = measure_bands(fp32.seen, bf16_runs)
    measured["holdout"] = holdout(fp32.seen, bf16_runs)
    if bands:
        write_band(model, measured, command, CPU_BAND)
    band = band_for(source_sha256(model), CPU_BAND)
    if band is not None:
        banded = ReaskingEngine(engines(model, "bfloat16"), lambda: fp32._inner._fast, band)
        got, seconds = ask(banded, model, rows, ops, 64)
        out.append(_row(model, "bf16", True, got, reference, labels,
                        banded.reasked / len(rows), seconds, changed=banded.changed))
        if bands:
            record_seconds(model, CPU_BAND, reference_s, seconds)
    return out, measured


def _row(model, precision, band, got, reference, labels, reasked, seconds, device="cpu",
         **extra) -> dict:
    n = len(got)
    return {"model": model, "device": device, "precision": precision, "band": band,
            "prompts": n,
            "agreement": round(sum(a == b for a, b in zip(got, reference)) / n, 4),
            "accuracy": round(sum(a == b for a, b in zip(got, labels)) / n, 4),
            "reasked": round(reasked, 4), "seconds": round(seconds, 2), **extra}


GPU_PRECISIONS = ("bf16", "fp8", "fp8-block")


def run_model_gpu(model: str, bands: bool, command: str,
                  precisions: tuple[str, ...] = GPU_PRECISIONS) -> tuple[list[dict], dict]:
    """The same prompts on the GPU: the reference is the plain-torch engine in float32 on the
    GPU (its fingerprint checked there first), each GPU-path precision is measured in two
    batchings, its band written under "<precision>-cuda", and asked again with it. Both
    batchings ask one engine, whose arena keeps every prompt's KV of the first, so the second
    computes each answer over cached keys: the band covers a warm cache's route too."""
    import torch

    from bench.decode import sheet_of
    from quail_engine.infer import fingerprint
    from quail_engine.infer.embedded import source_sha256
    from quail_engine.infer.engine import LocalEngine
    from quail_engine.infer.factory import load_engine
    from quail_engine.infer.gpu.engine import kv_fp8_requested
    from quail_engine.infer.reask import ReaskingEngine, band_for

    # the GPU precisions' engines build their KV arena as QUAIL_KV_DTYPE says; the bands in
    # bands.json are the bf16 arena's, so an fp8 arena's run is marked and never writes them
    arena = {"kv_arena": "fp8"} if kv_fp8_requested() else {}
    if arena and bands:
        raise SystemExit("bench trust: --bands writes the bf16 arena's bands; unset "
                         "QUAIL_KV_DTYPE to measure them (an fp8 arena's run is a comparison)")
    rows, ops = questions()
    labels = [r["label"] for r in rows]
    device = "cuda:0"
    from quail_engine.infer.embedded import embedded_name

    spec, model = model, embedded_name(model)
    ref_engine = LocalEngine.load(spec, device=device, dtype="float32")
    sha = source_sha256(spec)
    worst = fingerprint.check(ref_engine.model, ref_engine.codec.tokenizer,
                              fingerprint.reference_for(sha), f"{model} on {device}")
    fp32 = Recorder(ref_engine)
    reference, reference_s = ask(fp32, model, rows, ops, 64)
    gpu = (sheet_of(torch.cuda.get_device_name(0)) or "cuda").lower()
    out = [_row(model, "fp32", False, reference, reference, labels, 0.0, reference_s, gpu,
                fingerprint_max_diff=round(worst, 6), decisions=reference)]
    shifts = {}
    for precision in precisions:
        fast = load_engine(spec, device, precision)
        runs = []
        for batch in BATCHES:
            rec = Recorder(fast)
            got, seconds = ask(rec, model, rows, ops, batch)
            runs.append(rec.seen)
            extra = {"cache": "warm"} if runs[:-1] else {}
            out.append(_row(model, precision, False, got, reference, labels, 0.0, seconds,
                            gpu, batch=batch, **extra, **arena))
        shifts[precision] = measured = measure_bands(fp32.seen, runs)
        measured["holdout"] = holdout(fp32.seen, runs)
        key = f"{precision}-cuda"
        if bands:
            write_band(spec, measured, command, key)
        band = band_for(sha, key)
        if band is not None:
            banded = ReaskingEngine(fast, lambda: ref_engine, band)
            got, seconds = ask(banded, model, rows, ops, 64)
            out.append(_row(model, precision, True, got, reference, labels,
                            banded.reasked / len(rows), seconds, gpu,
                            changed=banded.changed, **arena))
            if bands:
                record_seconds(spec, key, reference_s, seconds)
        del fast
        torch.cuda.empty_cache()
    return out, shifts


def markdown(result: dict) -> str:
    lines = [f"# Trust: agreement with the float32 reference ({result['date']})", "",
             f"`{result['command']}` on {result['machine']}; {result['prompts']} labelled "
             "prompts (bench/data/trust.jsonl) through the product's operator path "
             + ("on the GPU (reference: the plain-torch engine in float32 on the GPU). "
                if any(r["device"] != "cpu" for r in result["rows"]) else "on the CPU engine. ")
             + "agreement: decisions equal to float32's; accuracy: equal to the label; "
             "reasked: share of decisions the band sent to float32; seconds: the answers' wall "
             "time (model load apart; the banded row's float32 engine was already loaded).", "",
             "| model | device | precision | band | batch | agreement | accuracy | reasked | "
             "seconds |", "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        arena = " (fp8 KV arena)" if r.get("kv_arena") == "fp8" else ""
        lines.append(f"| {r['model']} | {r['device']} | {r['precision']}{arena} | "
                     f"{'on' if r['band'] else 'off'} | {r.get('batch', 64)}"
                     f"{' (cache warm)' if r.get('cache') == 'warm' else ''} | {r['agreement']} | "
                     f"{r['accuracy']} | {r['reasked']} | {r['seconds']} |")
    lines += ["", "Largest bf16 - float32 margin shift per readout kind (matched prompts):", ""]
    for model, m in result["shifts"].items():
        per = {"bf16": m} if "max_shift" in m else m  # the CPU's bf16, or per GPU precision
        for precision, got in per.items():
            lines.append(f"- {model}, {precision}: {got['max_shift']} over {got['matched']}"
                         + _holdout_text(got.get("holdout")))
    return "\n".join(lines) + "\n"


def _holdout_text(h: dict | None) -> str:
    if not h:
        return ""
    return (f"; held out (each half's band from the other half): {h['misses']} misses of "
            f"{h['decisions']} decisions, largest shift over the other half's {h['used']}")


def main(argv: list[str]) -> int:
    import sys

    p = argparse.ArgumentParser(prog="python -m bench trust")
    p.add_argument("--models", nargs="+", default=["gemma3-270m", "smollm2-135m"])
    p.add_argument("--bands", action="store_true",
                   help="measure the bf16 bands and write them to quail_engine/infer/bands.json")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--out", default=str(RESULT))
    p.add_argument("--precisions", nargs="+", choices=GPU_PRECISIONS, default=list(GPU_PRECISIONS),
                   help="the GPU precisions measured (--device cuda)")
    args = p.parse_args(argv)
    if args.device != "cuda" and args.precisions != list(GPU_PRECISIONS):
        p.error("--precisions chooses among the GPU precisions: use it with --device cuda")
    command = " ".join(["python", *sys.argv[:1], *argv]).replace("-m bench ", "-m bench ")
    rows, shifts = [], {}
    for model in args.models:
        if args.device == "cuda":
            got, measured = run_model_gpu(model, args.bands, command, tuple(args.precisions))
        else:
            got, measured = run_model(model, args.bands, command)
        rows += got
        shifts[got[0]["model"] if got else model] = measured  # (a GGUF path: its model's name)
    prompts = rows[0]["prompts"] if rows else 0
    result = {"date": time.strftime("%Y-%m-%d"), "command": command,
              "machine": machine(),
              "prompts": prompts, "rows": rows, "shifts": shifts}
    write_result(result, "trust", markdown, args.out)
    return 0
