"""CPU throughput: Quail's engine vs a plain transformers baseline, measured in the same run.

Workloads (synthetic text from a fixed word pool, seeded, so every run sees the same tokens):
  filter: N prompts of ~150 tokens, one yes/no question (instruction shared as a prefix)
  join:   A anchors of ~300 tokens x P partners of ~40 tokens (anchor KV computed once)
Engines:
  quail:        LocalEngine via quail_testing/ask.py (packed prefill, prefix KV, trimmed head)
  transformers: AutoModelForCausalLM on the same converted weights and dtype; padded batches,
                the full prompt every time, full-vocabulary logits at the last position
requested tokens = every prompt token of every request; fresh = tokens actually computed.
`--busy K` runs K single-core busy loops beside the measurement (another process taking a core);
`--quail-only` skips the transformers baselines; PYTHONPATH=<an older checkout> measures that
checkout's engine.

    python -m bench engine-cpu                      # writes bench/results/engine-cpu.json|md
    python -m bench engine-cpu --quail-only --busy 1 --out /tmp/contended.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import subprocess
import sys
import time

from bench.results_io import write_result

POOL = ("the service product food staff room story price quality delivery screen battery music "
        "plot acting design support order taste view sound menu team value experience time "
        "was were is very quite rather really not never always fairly somewhat too so and but "
        "great good fine poor bad awful lovely slow fast clean dirty cheap loud quiet fresh cold "
        "warm friendly rude helpful late early broken solid simple clever dull bright").split()
FILTER_Q = "Is the following review positive?"
JOIN_Q = "Does the second text answer a need described in the first text?"


def words(rng: random.Random, n: int) -> str:
    out = []
    for i in range(n):
        out.append(rng.choice(POOL))
        if i % 12 == 11:
            out[-1] += "."
    return " ".join(out).capitalize() + "."


def sized_texts(rng: random.Random, count: int, low: int, high: int) -> list[str]:
    """`count` texts of roughly U[low, high] tokens each (about 1.15 tokens per pool word)."""
    return [words(rng, max(1, int(rng.randint(low, high) / 1.15))) for _ in range(count)]


def run_quail(engine, fn) -> dict:
    before = dict(vars(engine.stats))
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    after = vars(engine.stats)
    delta = {k: after[k] - before[k] for k in ("requested_tokens", "fresh_tokens",
                                               "forward_passes")}
    return {"engine": "quail", "seconds": seconds, **delta, "result": result}


def run_baseline(hf, prompts: list[list[int]], batch: int, yes: list[int], no: list[int],
                 pad_id: int, last_only: bool) -> dict:
    """Padded batches in input order. `last_only=False` is the plain call
    (`model(**batch).logits[:, -1]`: full-vocabulary logits at every position);
    `last_only=True` passes `logits_to_keep=1` (full vocabulary, last position only)."""
    import torch

    margins = []
    start = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(prompts), batch):
            chunk = prompts[i:i + batch]
            width = max(map(len, chunk))
            ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for r, p in enumerate(chunk):   # left padding: the last position is the prompt's
                ids[r, width - len(p):] = torch.tensor(p)
                mask[r, width - len(p):] = 1
            keep = {"logits_to_keep": 1} if last_only else {}
            logits = hf(input_ids=ids, attention_mask=mask, **keep).logits[:, -1].float()
            margins += (logits[:, yes].max(-1).values - logits[:, no].max(-1).values).tolist()
    seconds = time.perf_counter() - start
    tokens = sum(map(len, prompts))
    name = "transformers (last-position logits)" if last_only else "transformers"
    return {"engine": name, "seconds": seconds, "requested_tokens": tokens,
            "fresh_tokens": tokens, "forward_passes": -(-len(prompts) // batch), "result": margins}


def row(workload: str, r: dict) -> dict:
    out = {"workload": workload, "engine": r["engine"],
           "fresh_tokens_per_s": round(r["fresh_tokens"] / r["seconds"], 1),
           "requested_tokens_per_s": round(r["requested_tokens"] / r["seconds"], 1)}
    out.update({k: r[k] for k in ("seconds", "requested_tokens", "fresh_tokens",
                                  "forward_passes")})
    out["seconds"] = round(out["seconds"], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--dtype", default=None, help="default: the product's (settings.compute_dtype)")
    ap.add_argument("--filter-n", type=int, default=256)
    ap.add_argument("--anchors", type=int, default=8)
    ap.add_argument("--partners", type=int, default=64)
    ap.add_argument("--baseline-n", type=int, default=128,
                    help="prompts each transformers baseline runs per workload (a rate)")
    ap.add_argument("--batch", type=int, default=16, help="transformers batch size")
    ap.add_argument("--token-budget", type=int, default=2048)
    ap.add_argument("--out", default=None)
    ap.add_argument("--quail-only", action="store_true", help="skip the transformers baselines")
    ap.add_argument("--busy", type=int, default=0, metavar="K",
                    help="run K busy-loop processes beside the measurement")
    args = ap.parse_args(argv)

    import torch

    from quail_engine.infer.engine import LocalEngine
    from quail_engine.infer.loader import load_model, resolve_dtype, resolve_model_dir
    from quail_testing import ask

    load_start = time.perf_counter()
    model, tokenizer, config = load_model(args.model, "cpu", args.dtype)
    engine = LocalEngine(model, tokenizer, config, model_id=args.model,
                         token_budget=args.token_budget)
    hf = None
    if not args.quail_only:
        from transformers import AutoModelForCausalLM

        hf = AutoModelForCausalLM.from_pretrained(
            str(resolve_model_dir(args.model)), dtype=resolve_dtype(args.dtype, "cpu")).eval()
    load_s = time.perf_counter() - load_start
    bt = engine._booleans(ask.BooleanReadout())
    yes, no = list(bt.true_ids), list(bt.false_ids)
    pad = getattr(tokenizer, "pad_token_id", None) or 0  # only the baselines pad
    rng = random.Random(0)
    loadavg_before = os.getloadavg()

    docs = sized_texts(rng, args.filter_n, 60, 200)
    anchors = sized_texts(rng, args.anchors, 260, 320)
    partners = sized_texts(rng, args.partners, 20, 45)
    full = [sum(ask.prompt_split(engine, d, FILTER_Q), []) for d in docs]
    pairs = [sum(ask.join_split(engine, a, p, JOIN_Q), []) for a in anchors for p in partners]
    head_len = sum(len(ask.join_split(engine, a, "", JOIN_Q)[0]) for a in anchors) // len(anchors)
    name_f = f"filter {len(full)} x ~{sum(map(len, full)) // len(full)} tok"
    name_j = (f"join {len(anchors)} anchors x {len(partners)} partners "
              f"(~{head_len}+~{sum(map(len, pairs)) // len(pairs) - head_len} tok)")

    sample = {name_f: full[:args.baseline_n], name_j: pairs[:args.baseline_n]}
    quail_calls = {
        name_f: lambda: ask.ask_boolean(engine, docs, FILTER_Q, calibrate=False),
        name_j: lambda: [a for row_ in ask.ask_join(engine, anchors, partners, JOIN_Q,
                                                     calibrate=False) for a in row_]}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    runs = {}
    try:
        for w, call in quail_calls.items():   # each workload's engines back to back
            runs[w] = [run_quail(engine, call)]
            runs[w] += [run_baseline(hf, sample[w], args.batch, yes, no, pad, last_only)
                        for last_only in ((False, True) if hf is not None else ())]
    finally:
        for proc in busy:
            proc.kill()
    governors = [h for h in model.model.embed_tokens._forward_pre_hooks.values()
                 if hasattr(h, "passes")]
    thread_counts = dict(governors[0].passes) if governors else None
    rows, ratios, agreement = [], {}, {}
    for w, (ours, *bases) in runs.items():
        rows += [row(w, r) for r in (ours, *bases)]
        ours_rate = ours["requested_tokens"] / ours["seconds"]
        ratios[w] = {b["engine"]: round(ours_rate * b["seconds"] / b["requested_tokens"], 2)
                     for b in bases}
        if bases:
            agreement[w] = sum((a.margin > 0) == (m > 0) for a, m in
                               zip(ours["result"], bases[0]["result"])) / len(bases[0]["result"])
    result = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python " + " ".join(sys.argv),
        "busy_processes": args.busy,
        "machine": {"nproc": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                    "thread_counts": thread_counts,
                    "loadavg_before": loadavg_before, "loadavg_after": os.getloadavg(),
                    "processor": platform.processor() or platform.machine(),
                    "torch": torch.__version__, "python": platform.python_version()},
        "model": args.model, "dtype": str(model.model.embed_tokens.weight.dtype),
        "load_seconds": round(load_s, 1),
        "token_budget": args.token_budget, "baseline_batch": args.batch,
        "baseline_prompts": {w: len(p) for w, p in sample.items()},
        "decision_agreement": agreement, "rows": rows,
        "ratios_requested_tokens_per_s": ratios,
    }
    write_result(result, "engine-cpu", markdown, args.out)
    return 0


def markdown(r: dict) -> str:
    m = r["machine"]
    lines = [f"# CPU engine benchmark ({r['date']})", "",
             f"`{r['command']}` - model {r['model']} ({r['dtype']}), {m['nproc']} cores, "
             f"{m['torch_threads']} torch threads (passes per thread count: "
             f"{m.get('thread_counts')}), OMP_WAIT_POLICY={m.get('omp_wait_policy')}, "
             f"{r.get('busy_processes', 0)} busy processes beside it, "
             f"load average before {m['loadavg_before'][0]:.2f}, after "
             f"{m['loadavg_after'][0]:.2f} (other work shared the cores)", "",
             "| workload | engine | requested tok/s | fresh tok/s | s | passes |",
             "|---|---|---:|---:|---:|---:|"]
    for x in r["rows"]:
        lines.append(f"| {x['workload']} | {x['engine']} | {x['requested_tokens_per_s']:.0f} | "
                     f"{x['fresh_tokens_per_s']:.0f} | {x['seconds']:.1f} | "
                     f"{x['forward_passes']} |")
    lines.append("")
    for w, ratio in r["ratios_requested_tokens_per_s"].items():
        if not ratio:
            continue
        parts = ", ".join(f"{v}x vs {k}" for k, v in ratio.items())
        lines.append(f"- {w}: quail requested tok/s = {parts}; decisions agree with transformers "
                     f"on {r['decision_agreement'][w]:.1%}")
    if r["decision_agreement"]:
        lines.append(f"- transformers baselines ran the first {r['baseline_prompts']} prompts of "
                     "each workload (tokens/s is a rate); quail ran all of them.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
