"""Generation at scale through the product: `AI_COMPLETE` over many documents by `quail query`,
output tokens per second beside the decode speed of light and transformers' `generate`.

Each run is one `quail query` process (Snowflake SQL, `--no-cache`) over `rows` documents of
~300 tokens (200-400) asking for a one-sentence summary in at most `max_tokens` tokens, free
or under a JSON schema (`response_format`: constrained decoding). Its time is the query's wall
time less the model load (QUAIL-B's rule; load_s is beside it). Random weights rarely write an
end-of-sequence token, so answers run to `max_tokens`: output tokens are counted, not assumed
(the report's decode tokens, plus each answer's last token, which is never fed back).

Speed of light (`sol_s`): the prefill of every prompt at the datasheet fp8 rate (attention at
the bf16 rate), plus the decode steps at the arena's batch: as many sequences at once as the
engine's paged KV arena holds (its size read off the query's log), each step the longer of
reading the weights and the batch's KV at the HBM bandwidth and its FLOPs at the fp8 rate.
The datasheet is the H200's (the issue's convention, `sol_s`, `sol_fraction`); a run on an H100
also gets its own card's (`sol_s_h100`, `sol_fraction_h100`: the same FLOP rates, 3.35 TB/s).
transformers: `generate` (greedy, bf16, one padded batch of `--hf-rows`) on the same model
directory and the first `--hf-rows` prompts, in the same device call.

A run is ROWSxTOKENS with suffixes: `c` under the JSON schema, `h` free text after the very
prompt a `c` run reads (the schema hint included: the two differ only in the grammar), `g` a grouped `AI_AGG` over the
rows in 20 groups (map-reduce past the context; its speed of light is that of the prompts it
asked, map chunks included, as if its rounds need not wait for one another), `s` step by step
(QUAIL_DECODE_OVERLAP=0: the host reads each step's tokens before the next step starts, the
loop before infer/decode_overlap.py), `k` the KV arena in fp8 (QUAIL_KV_DTYPE=fp8:
infer/gpu/paged_kv.py, e4m3 with a scale per token and KV head). `engine s` is the operators'
engine time, beside the run's wall time.

The speed of light keeps one convention for every run, `k` ones included: bf16 KV bytes per
token, and the batch a bf16 arena of the same memory would hold (a `k` run's arena, read off
its log, scaled back by its bytes per token), so a `k` run's sol equals its bf16 twin's and
their sol fractions compare the two runs' times directly.

    # H200 (device call: carry [".whl", ".carry/tok-smollm2"]; `python -m bench e2e-gpu
    # --prepare` writes .carry/tok-smollm2, and .carry/e2e/whl holds the wheels .whl names):
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && \\
      PYTHONPATH=/tmp/site:$PWD python3 -m bench decode --runs 2000x48 2000x48c 2000x256 \\
      --tokenizer .carry/tok-smollm2 --out $OUT/decode-gpu.json
    # fp8 KV against bf16 KV in one call: --runs 2000x48 2000x48k 2000x256 2000x256k
    # CPU (the embedded writer, SmolLM2-135M):
    python -m bench decode --device cpu --runs 16x48     # writes bench/results/decode-cpu.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from operator import eq
from pathlib import Path

from bench.results_io import write_result
from quail_engine.plan import device as _dev

ROOT = Path(__file__).resolve().parents[1]
INSTRUCTION = "Summarize this text in one sentence: {0}"
SCHEMA = ("{'type': 'json', 'schema': {'type': 'object', 'properties': {'summary': "
          "{'type': 'string'}, 'sentiment': {'type': 'string', 'enum': ['positive', 'negative', "
          "'neutral']}}, 'required': ['summary', 'sentiment']}}")
VOCAB = 151936  # Qwen3-4B's: the random model's LM head has its real size
# datasheets (quail_engine/plan/device.py): dense fp8 and bf16 tensor FLOP/s, HBM bytes/s. The
# H200's is the QUAIL-B convention and the issue's target; a run on another card is priced on
# its own sheet too, since a decode step reads memory and the H100's HBM is the slower
DATASHEETS = {"H200": (_dev.H200_DATASHEET_FP8.flops, _dev.H200_DATASHEET.flops,
                       _dev.H200_DATASHEET.bandwidth),
              "H100": (_dev.H100_SXM_FP8.flops, _dev.H100_SXM.flops, _dev.H100_SXM.bandwidth)}


def sheet_of(device_name: str) -> str | None:
    """The datasheet of the card named `device_name` (torch's name), None for one not listed."""
    return next((k for k in DATASHEETS if k in device_name), None)


GROUPS = 20  # a grouped run's groups (rows spread evenly by id)


def sql(max_tokens: int, constrained: bool, grouped: bool = False,
        hinted: bool = False) -> str:
    """The run's query. `hinted`: free text after the very prompt a constrained run reads
    (its instruction, the document, then the schema hint the executor appends), so that the
    two differ only in the grammar."""
    if grouped:  # each group's summary: map-reduce past the context (exec/aggregate.py)
        return (f"SELECT id % {GROUPS} AS g, AI_AGG(text, 'Summarize these texts in one "
                f"sentence.') AS s FROM docs GROUP BY g")
    fmt = f", response_format => {SCHEMA}" if constrained else ""
    prompt = f"PROMPT('{INSTRUCTION}', text)"
    if hinted:  # (the hint as an argument: its JSON braces are not the template's)
        prompt = f"PROMPT('{INSTRUCTION}\n\n{{1}}', text, '{schema_hint()}')"
    return (f"SELECT id, AI_COMPLETE(model => 'm', prompt => {prompt}, "
            f"model_parameters => {{'max_tokens': {max_tokens}}}{fmt}) AS s FROM docs")


def schema_hint() -> str:
    """What the executor appends to a constrained run's prompt (exec/tasks.task_prompt),
    without its leading blank line."""
    from quail_engine.exec.tasks import task_prompt
    from quail_engine.sql.query import parse

    op = parse(sql(1, True), "snowflake").ai_ops[0]
    return task_prompt(op, "").lstrip("\n").replace("'", "''")


@dataclass(frozen=True)
class Run:
    rows: int
    max_tokens: int
    constrained: bool = False  # under the JSON schema
    hinted: bool = False       # free, after the constrained run's prompt (schema hint included)
    grouped: bool = False      # AI_AGG over GROUPS groups (max_tokens: the executor's own)
    step_by_step: bool = False  # QUAIL_DECODE_OVERLAP=0: the host reads each step's tokens
    #                             before the next step starts
    kv_fp8: bool = False       # QUAIL_KV_DTYPE=fp8: the paged KV arena in e4m3
    stepped_start: bool = False  # QUAIL_FORCED_TOKENS=0: the tokens a grammar forces first
    #                              decoded step by step instead of in the prompt's prefill

    @property
    def name(self) -> str:
        return (f"decode-{self.rows}x{self.max_tokens}{'c' if self.constrained else ''}"
                f"{'h' if self.hinted else ''}"
                f"{'g' if self.grouped else ''}{'s' if self.step_by_step else ''}"
                f"{'k' if self.kv_fp8 else ''}{'n' if self.stepped_start else ''}")


def parse_run(spec: str) -> Run:
    """'2000x48' -> 2,000 rows, 48 tokens; suffixes: 'c' under the JSON schema, 'h' free after
    the constrained run's prompt, 'g' AI_AGG over 20 groups, 's' step by step (the decode loop
    without overlap), 'k' the KV arena in fp8, 'n' a grammar's forced first tokens decoded step by
    step (not prefilled with the prompt)."""
    m = re.fullmatch(r"(\d+)x(\d+)(c?)(h?)(g?)(s?)(k?)(n?)", spec)
    if not m:
        raise argparse.ArgumentTypeError(f"a run is ROWSxTOKENS[c][h][g][s][k][n], e.g. "
                                         f"2000x48; got {spec!r}")
    return Run(int(m.group(1)), int(m.group(2)), *(bool(m.group(k)) for k in range(3, 9)))


def bf16_arena_tokens(config, tokens: int) -> int:
    """The tokens a bf16 arena holds in the bytes of an fp8 arena of `tokens` (e4m3 values and
    a float32 scale per KV head: infer/gpu/paged_kv.page_bytes_for) -> the sol's batch."""
    d = config.head_dim
    return tokens * (d + 4) // (2 * d)


def sol_seconds(config, rows: int, prompt_tokens: float, output_tokens: float,
                arena_tokens: int | None, page: int = 64, sheet: str = "H200") -> dict:
    """The decode speed of light of `rows` answers (see the module docstring), on `sheet`'s
    datasheet."""
    peak_fp8, peak_bf16, hbm = DATASHEETS[sheet]
    c = config
    layer_params = (c.hidden_size * (c.num_heads + 2 * c.num_kv_heads) * c.head_dim
                    + c.num_heads * c.head_dim * c.hidden_size
                    + 3 * c.hidden_size * c.intermediate_size)
    params = c.num_layers * layer_params
    weight_bytes = params + 2 * c.vocab_size * c.hidden_size  # fp8 layers, bf16 LM head
    kv_bytes = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 2  # bf16 K and V per token
    attn = 4 * c.num_layers * c.num_heads * c.head_dim  # FLOPs per query-key pair
    out_each = output_tokens / rows
    seq_tokens = prompt_tokens + out_each
    per_seq_pages = math.ceil(seq_tokens / page) + 2
    batch = rows if arena_tokens is None else max(1, min(rows, arena_tokens // page
                                                         // per_seq_pages))
    prefill = rows * (2 * (params + c.vocab_size * c.hidden_size / max(prompt_tokens, 1))
                      * prompt_tokens / peak_fp8 + attn * prompt_tokens ** 2 / 2 / peak_bf16)
    steps = math.ceil(rows / batch) * max(out_each - 1, 0)
    ctx = prompt_tokens + out_each / 2
    step = max((weight_bytes + batch * ctx * kv_bytes) / hbm,
               batch * (2 * params + 2 * c.vocab_size * c.hidden_size) / peak_fp8
               + batch * attn * ctx / peak_bf16)
    return {"sol_s": round(prefill + steps * step, 4), "sol_prefill_s": round(prefill, 4),
            "sol_step_ms": round(step * 1000, 3), "sol_batch": batch,
            "sol_decode_tokens_per_s": round(batch / step)}


def query_run(args, run: Run, docs: Path, workdir: Path) -> dict:
    rows, max_tokens, constrained, name = run.rows, run.max_tokens, run.constrained, run.name
    report = workdir / f"{name}.report.json"
    log_file = workdir / f"{name}.log"
    report.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "quail_engine", "-v", "query", "-e",
           sql(max_tokens, constrained, run.grouped, run.hinted),
           "--dialect", "snowflake", "--device", args.device, "--no-cache", "--report",
           str(report), "--output", str(workdir / f"{name}.parquet"), "-q",
           "--table", f"docs={docs}"]
    if args.model_dir:
        cmd += ["--model", str(args.model_dir), "--precision", args.precision]
    env = dict(os.environ, DO_NOT_TRACK="1", QUAIL_CACHE_DIR=str(workdir / f"cache-{name}"),
               QUAIL_DECODE_OVERLAP="0" if run.step_by_step else "1",
               QUAIL_KV_DTYPE="fp8" if run.kv_fp8 else "bf16",
               QUAIL_FORCED_TOKENS="0" if run.stepped_start else "1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    if args.host_profile is not None:  # the host's stacks, every thread, beside the report
        args.host_profile.mkdir(parents=True, exist_ok=True)
        cmd = ["py-spy", "record", "-r", "100", "--nonblocking", "--threads", "-f", "raw",
               "-o", str(args.host_profile / f"{name}.raw"), "--"] + cmd
    t0 = time.perf_counter()
    with log_file.open("w") as out:
        try:
            code = subprocess.run(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            code = 124
    row = {"rows": rows, "max_tokens": max_tokens, "constrained": constrained,
           "hinted": run.hinted, "grouped": run.grouped, "overlap": not run.step_by_step,
           "kv": "fp8" if run.kv_fp8 else "bf16", "forced_start": not run.stepped_start,
           "exit": code,
           "process_s": round(time.perf_counter() - t0, 2)}
    text = log_file.read_text()
    if code != 0 or not report.exists():
        row["error"] = text[-1500:]
        return row
    rep = json.loads(report.read_text())
    if args.host_profile is not None:
        shutil.copy(report, args.host_profile / report.name)
        shutil.copy(log_file, args.host_profile / log_file.name)
    ops = rep["operators"]
    # (a grammar's forced first tokens are the answer's, computed in the prompt's prefill)
    decoded = sum(o.get("decode_tokens", 0) + o.get("forced_tokens", 0) for o in ops)
    answered = sum(o["prompts"] for o in ops)
    output = decoded + answered
    run_s = rep["wall_s"] - rep["load_s"]
    nulls = _nulls(workdir / f"{name}.parquet")
    row.update(wall_s=round(rep["wall_s"], 3), load_s=round(rep["load_s"], 3), run_s=round(run_s, 3),
               answered=answered, null_answers=nulls, output_tokens=output,
               prompt_tokens=sum(o["fresh_tokens"] for o in ops),
               gpu_pass_s=round(sum(o.get("gpu_pass_s", 0.0) for o in ops), 3),
               engine_s=round(sum(o.get("engine_s", 0.0) for o in ops), 3),
               alloc_retries=sum(o.get("alloc_retries", 0) for o in ops),
               output_tokens_per_s=round(output / run_s, 1) if run_s > 0 else None)
    row.update(gpu_split(rep, row["engine_s"], row["gpu_pass_s"]))
    arena = re.search(r"paged KV arena: (\d+) pages of (\d+) tokens", text)
    if args.config is not None and answered:
        pages, page = (int(arena.group(1)), int(arena.group(2))) if arena else (None, 64)
        tokens = pages * page if pages else None
        sol_tokens = bf16_arena_tokens(args.config, tokens) if tokens and run.kv_fp8 else tokens
        # a grouped run's bound is that of the prompts it asked (each map chunk and each
        # group's last prompt), as if its map-reduce rounds need not wait for one another
        asked = answered if run.grouped else rows
        row.update(sol_seconds(args.config, asked, row["prompt_tokens"] / asked, output,
                               sol_tokens, page))
        row["sol_fraction"] = round(row["sol_s"] / run_s, 3) if run_s > 0 else None
        own = getattr(args, "sheet", None)
        if own not in (None, "H200"):  # the card's own datasheet beside the H200 convention
            mine = sol_seconds(args.config, asked, row["prompt_tokens"] / asked, output,
                               sol_tokens, page, own)["sol_s"]
            row[f"sol_s_{own.lower()}"] = mine
            row[f"sol_fraction_{own.lower()}"] = round(mine / run_s, 3) if run_s > 0 else None
        row["arena_tokens"] = tokens
    return row


def gpu_split(report: dict, engine_s: float, gpu_pass_s: float) -> dict:
    """Where a run's GPU time went, from its report's timeline: the prompts' prefill passes
    (each batch's `pass_log`, with their GPU seconds) against the decode steps (the rest of
    the passes), and the operator's time the GPU spent outside any pass (`gpu_idle_s`: the
    host's share, which the overlapped loop exists to hide). Empty where the passes carry no
    GPU time (the CPU)."""
    batches = report.get("timeline", {}).get("batches", [])
    logged = [p for b in batches for p in b.get("pass_log", [])]
    if not any("gpu_s" in p for p in logged):
        return {}
    prefill_s = sum(p.get("gpu_s", 0.0) for p in logged)
    tokens = sum(p["tokens"] for p in logged)
    steps = sum(b.get("passes", 0) for b in batches) - len(logged)
    decode_s = gpu_pass_s - prefill_s
    return {"prefill_passes": len(logged), "prefill_gpu_s": round(prefill_s, 3),
            "prefill_tokens_per_gpu_s": round(tokens / prefill_s) if prefill_s > 0 else None,
            "decode_passes": steps, "decode_gpu_s": round(decode_s, 3),
            "decode_ms_per_pass": round(1e3 * decode_s / steps, 2) if steps > 0 else None,
            "gpu_idle_s": round(engine_s - gpu_pass_s, 3)}


def forced_start_agreement(runs, workdir: Path) -> list[dict]:
    """For each constrained run made both ways (its forced first tokens prefilled, and 'n':
    decoded step by step), how many rows' answers the two give alike (the last run of each)."""
    import pyarrow.parquet as pq

    out = []
    for run in dict.fromkeys(runs):  # (each run once, in order: a repeat wrote the same file)
        other = replace(run, stepped_start=True)
        if not run.constrained or run.stepped_start or other not in runs:
            continue
        paths = [workdir / f"{r.name}.parquet" for r in (run, other)]
        if not all(p.exists() for p in paths):
            continue
        a, b = (pq.read_table(p).sort_by("id").column("s").to_pylist() for p in paths)
        out.append({"run": run.name, "rows": len(a), "same_answers": sum(map(eq, a, b)),
                    "parsed_both": sum(x is not None and y is not None for x, y in zip(a, b))})
    return out


def _nulls(path: Path) -> int | None:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None
    column = pq.read_table(path).column("s").to_pylist() if path.exists() else []
    return sum(v is None for v in column)


def hf_row(args, docs: Path, max_tokens: int) -> dict:
    """transformers' greedy `generate` on the first --hf-rows prompts, one padded batch."""
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    texts = pq.read_table(docs).column("text").to_pylist()[:args.hf_rows]
    tok = AutoTokenizer.from_pretrained(args.model_dir)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.bfloat16).cuda()
    batch = tok([INSTRUCTION.format(t) for t in texts], return_tensors="pt", padding=True)
    batch = {k: v.cuda() for k, v in batch.items()}
    with torch.inference_mode():
        model.generate(**{k: v[:2] for k, v in batch.items()}, max_new_tokens=4,
                       do_sample=False)  # warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(**batch, max_new_tokens=max_tokens, do_sample=False)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    new = out[:, batch["input_ids"].shape[1]:]
    produced = int((new != tok.pad_token_id).sum()) if tok.pad_token_id is not None else \
        new.numel()
    del model
    torch.cuda.empty_cache()
    return {"path": "transformers", "rows": len(texts), "max_tokens": max_tokens,
            "output_tokens": produced, "seconds": round(seconds, 3),
            "output_tokens_per_s": round(produced / seconds, 1)}


class _CharsTokenizer:
    """A word's tokens guessed as a token per 4 characters (the CPU run's corpus: no tokenizer
    file needed; the query's report counts the real tokens)."""

    def encode_batch(self, texts):
        return [[0] * max(1, len(t) // 4) for t in texts]


def markdown(result: dict) -> str:
    lines = [f"# Generation through `quail query` ({result['date']})", "",
             f"Machine: {result['machine']}. Model: {result['model']}. Command: "
             f"`{result['command']}`.", "",
             "Time: wall less model load. Output tokens: counted (decode tokens fed back + "
             "each answer's last). Speed of light: see bench/decode.py.", "",
             "| rows | max tokens | constrained | grouped | overlap | KV | exit | load s | run s | "
             "engine s | output tokens | tokens/s | sol s | sol fraction | sol batch | "
             "x transformers | NULL |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        lines.append("| " + " | ".join(str(r.get(k, "")) for k in (
            "rows", "max_tokens", "constrained", "grouped", "overlap", "kv", "exit", "load_s",
            "run_s",
            "engine_s", "output_tokens",
            "output_tokens_per_s", "sol_s", "sol_fraction", "sol_batch", "transformers_ratio",
            "null_answers")) + " |")
    split = ("prefill_gpu_s", "prefill_tokens_per_gpu_s", "decode_passes", "decode_gpu_s",
             "decode_ms_per_pass", "gpu_idle_s")
    if any("prefill_gpu_s" in r for r in result["runs"]):
        lines += ["", "Where the operator's time went (`gpu_split`): the prompts' prefill "
                      "passes, the decode steps, and the GPU outside any pass.", "",
                  "| rows | max tokens | constrained | " + " | ".join(split) + " |",
                  "|---|---|---|" + "---:|" * len(split)]
        for r in result["runs"]:
            lines.append("| " + " | ".join(str(r.get(k, "")) for k in (
                "rows", "max_tokens", "constrained") + split) + " |")
    own = next((k[len("sol_fraction_"):] for r in result["runs"] for k in r
                if k.startswith("sol_fraction_")), None)
    if own:
        lines += ["", f"sol s and sol fraction: the H200 datasheet (the issue's convention); "
                      f"on this card's own ({own.upper()}: "
                      f"{DATASHEETS[own.upper()][2] / 1e12:g} TB/s) the fraction is "
                      + ", ".join(str(r.get(f"sol_fraction_{own}")) for r in result["runs"])
                      + " (in order)."]
    for r in result.get("transformers", []):
        lines.append("")
        if "error" in r:  # (its row holds the error instead of the counts)
            lines.append(f"transformers `generate`, {r['max_tokens']} tokens, failed: "
                         f"{r['error'].splitlines()[0]}")
            continue
        lines.append(f"transformers `generate`, {r['rows']} rows x {r['max_tokens']} tokens: "
                     f"{r['output_tokens']} tokens in {r['seconds']} s = "
                     f"{r['output_tokens_per_s']} tokens/s.")
    for a in result.get("forced_start_agreement", []):
        lines += ["", f"{a['run']} against its 'n' twin (forced first tokens decoded step by "
                      f"step): {a['same_answers']} of {a['rows']} answers alike "
                      f"({a['parsed_both']} parsed in both)."]
    for r in result["runs"]:
        if r.get("error"):
            lines += ["", f"{r['rows']}x{r['max_tokens']} failed:", "```", r["error"][-800:],
                      "```"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench decode", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="+", type=parse_run, default=[parse_run("2000x48")])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="fp8")
    ap.add_argument("--tokenizer", type=Path, help="tokenizer dir of the random model (GPU)")
    ap.add_argument("--hf-rows", type=int, default=256)
    ap.add_argument("--timeout", type=float, default=590)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/quail-decode"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--host-profile", type=Path, default=None, metavar="DIR",
                    help="run each query under py-spy (on PATH): DIR/NAME.raw, the host's "
                         "stacks per thread, DIR/NAME.report.json, its timeline, and "
                         "DIR/NAME.log, its log")
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    gpu = args.device.startswith("cuda")
    if not gpu and any(run.kv_fp8 for run in args.runs):
        ap.error("a 'k' run (fp8 KV) needs the GPU engine's paged arena: --device cuda")
    args.model_dir = args.config = None
    model = "the embedded writer (SmolLM2-135M), CPU"
    if gpu:
        import torch

        from quail_engine.infer.models import config_from_hf
        from quail_engine.infer.tokenizer import load_tokenizer
        from quail_testing.model_dir import write_model_dir

        args.model_dir = args.workdir / "model"
        hf = write_model_dir(args.model_dir, args.tokenizer, tiny=False, device="cuda",
                             vocab_size=VOCAB)
        args.config = config_from_hf(hf)
        args.sheet = sheet_of(torch.cuda.get_device_name())
        tokenizer = load_tokenizer(str(args.model_dir))
        model = f"random Qwen3-4B ({args.precision}), tokenizer of {args.tokenizer.name}"
    else:
        tokenizer = _CharsTokenizer()
    from bench.gpu.e2e_data import write_corpora

    largest = max(run.rows for run in args.runs)
    docs = write_corpora(args.workdir / "data", tokenizer, largest, 0, 0)["docs"]
    import pyarrow.parquet as pq

    full = pq.read_table(docs)
    runs, hf = [], []
    for run in args.runs:
        path = args.workdir / "data" / f"docs-{run.rows}.parquet"
        pq.write_table(full.slice(0, run.rows), path)
        row = query_run(args, run, path, args.workdir)
        print(json.dumps({k: v for k, v in row.items() if k != "error"}), flush=True)
        runs.append(row)
    if gpu and args.hf_rows:
        for max_tokens in sorted({r.max_tokens for r in args.runs if not r.grouped}):
            try:
                hf.append(hf_row(args, docs, max_tokens))
            except Exception as exc:  # (the baseline's failure is reported, not fatal)
                hf.append({"path": "transformers", "max_tokens": max_tokens,
                           "error": f"{type(exc).__name__}: {exc}"[:500]})
            print(json.dumps(hf[-1]), flush=True)
    rates = {r["max_tokens"]: r.get("output_tokens_per_s") for r in hf}
    for r in runs:
        theirs = None if r["grouped"] else rates.get(r["max_tokens"])
        if theirs and r.get("output_tokens_per_s"):
            r["transformers_ratio"] = round(r["output_tokens_per_s"] / theirs, 2)
    agreement = forced_start_agreement(args.runs, args.workdir)
    machine = platform.node()
    if gpu:
        import torch

        machine = torch.cuda.get_device_name()
    result = {"date": time.strftime("%Y-%m-%d"), "machine": machine, "model": model,
              "command": "python -m bench decode " + " ".join(argv or sys.argv[1:]),
              "runs": runs, "transformers": hf, "forced_start_agreement": agreement}
    write_result(result, "decode-gpu" if gpu else "decode-cpu", markdown, args.out)
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
