"""Host overhead of `quail query` with the forward pass taken out: the real CLI path (planner,
scans, token store, batch pipeline, the GPU engine's request handling, prefix cache, packing,
paged KV arena and read-back) over a tiny random GpuCausalLM on the CPU whose forward only packs
the batch (gpu/batch.pack, as on a GPU) and returns zeros. What this measures is the time a
query spends outside the model, per prompt: the part of the end-to-end gap to the engine bench
that the host owns (on the H200 the GPU waits through the engine thread's share of it).

    python -m bench.probes.host_overhead --workload join --anchors 40 --partners 1100 [--profile]
    python -m bench.probes.host_overhead --quailb IMDB-2 --scale 0.1 [--profile]
    python -m bench.probes.host_overhead --workload complete --docs 2000 --max-tokens 48 [--constrained]
        [--tokenizer .carry/tok-smollm2]   (bench decode's GPU prompts, token for token)

`--quailb ID`: that QUAIL-B query (bench/quailb) over its generated tables at `--scale` instead.
`--workload complete`: bench/decode.py's AI_COMPLETE (`--constrained`: under its JSON schema)
over the filter's documents; the tiny model's logits favour one plain token, so every answer
runs to `--max-tokens` (as random weights do on the GPU) and the decode loop's host work per
step is all there is besides packing.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

import torch

from bench.decode import sql as decode_sql
from bench.e2e_gpu import FILTER_SQL, JOIN_SQL
from bench.gpu.e2e_data import write_corpora
from quail_testing.model_dir import write_model_dir

ROOT = Path(__file__).resolve().parents[2]


def packing_engine(spec: str, pages: int, tokenizer=None, token: int | None = None,
                   passes: list | None = None, end_every: int = 0, launches: int = 0,
                   forward_s: list | None = None):
    """GpuEngine on a tiny GpuCausalLM (CPU) whose forward packs the batch and returns zeros.
    `passes` (if given) collects ("prefill", tokens) and ("decode", sequences) per pass.
    `end_every` (with `token`): a decode step whose sequence's KV holds a multiple of this many
    tokens writes end-of-sequence, so answers end after 1 to `end_every` tokens, spread by
    their prompts' lengths, as a trained model's answers end (random weights' run to
    max_tokens)."""
    from quail_engine.infer.gpu.batch import pack, pack_decode
    from quail_engine.infer.gpu.engine import GpuEngine
    from quail_engine.infer.gpu.load import load_checkpoint
    from quail_engine.infer.gpu.model import GpuCausalLM
    from quail_engine.infer.gpu.paged_kv import PagedKVArena

    state, tok, config = load_checkpoint(spec, "cpu", None, tokenizer)
    model = GpuCausalLM(config, state, device="cpu", dtype=torch.float32)
    model.arena = PagedKVArena(config.num_layers, config.num_kv_heads, config.head_dim, pages,
                               64, torch.float32, model.device)

    one = torch.zeros(16)

    def forward(ids, positions, cu, prefixes, reads, store_kv=None):
        if passes is not None:
            passes.append(("prefill", len(ids)))
        t0 = time.perf_counter()
        b = pack(ids, positions, cu, prefixes, reads, store_kv, model.arena, model.device,
                 model.lib_attention)
        for _ in range(launches):
            torch.add(one, 1.0)
        if forward_s is not None:
            forward_s[0] += time.perf_counter() - t0
        return torch.zeros(len(reads), config.hidden_size), b.stored

    def decode(ids, prefixes):  # (a decode step packs its batch and grows its KV in place)
        if passes is not None:
            passes.append(("decode", len(prefixes)))
        pack_decode(ids, prefixes, model.arena, model.device)
        hidden = torch.zeros(len(prefixes), config.hidden_size)
        if end_every:  # (each row's KV length, for vocab_logits to end some answers)
            hidden[:, 0] = torch.tensor([float(p.num_tokens) for p in prefixes])
        return hidden

    model.forward, model.decode = forward, decode
    if token is not None:  # (one plain token always wins: no answer ends early)
        plain = torch.zeros(config.vocab_size)
        plain[token] = 1.0
        model.vocab_logits = lambda hidden: plain.expand(hidden.shape[0], -1)
        if end_every:
            from quail_engine.infer.textio import TextCodec

            ended = torch.zeros(config.vocab_size)
            ended[min(TextCodec(tok, config).eos_ids)] = 1.0

            def vocab_logits(hidden):
                ends = (hidden[:, 0].long() % end_every == 0).unsqueeze(1)
                return torch.where(ends, ended, plain)
            model.vocab_logits = vocab_logits
        # (and the prefill's logits, where an answer's first token comes from: all-zero logits
        # choose token 0, an end-of-text id in SmolLM2's vocabulary, which ended every answer)
        model.logits = lambda hidden, token_ids=None: (
            plain if token_ids is None else plain[token_ids]).expand(hidden.shape[0], -1)
    return GpuEngine(model, tok, config, model_id=spec, token_budget=65536)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=("filter", "join", "complete"), default="join")
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--anchors", type=int, default=50)
    p.add_argument("--partners", type=int, default=1100)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/quail-host"))
    p.add_argument("--carry", type=Path, default=ROOT / ".carry" / "e2e")
    p.add_argument("--pages", type=int, default=4096, help="KV arena pages of 64 tokens")
    p.add_argument("--max-tokens", type=int, default=48, help="--workload complete's answers")
    p.add_argument("--constrained", action="store_true", help="--workload complete under a schema")
    p.add_argument("--end-every", type=int, default=0,
                   help="--workload complete: answers end after 1 to N tokens (spread by their "
                        "prompts' lengths), as trained weights' do; 0: all run to --max-tokens")
    p.add_argument("--tokenizer", type=Path, default=None,
                   help="the tiny model's tokenizer dir (default: --carry's tok; bench decode's "
                        "GPU runs read .carry/tok-smollm2)")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--passes", action="store_true",
                   help="print the engine's passes in order: prefill tokens, decode sequences")
    p.add_argument("--launches", type=int, default=0,
                   help="tiny torch operators each prefill pass issues after packing, standing for "
                        "the GPU forward's kernel launches (Qwen3-4B: ~1,700 a pass)")
    p.add_argument("--quailb", default="", help="a QUAIL-B query id (quail_testing/quailb/queries.py)")
    p.add_argument("--scale", default="0.1", help="QUAIL-B scale of --quailb's tables")
    args = p.parse_args(argv)

    from quail_engine.cli import main as cli_main
    from quail_engine.exec import facade
    from quail_engine.infer import factory
    from quail_engine.infer.tokenizer import load_tokenizer

    model_dir = args.workdir / "model-tiny"
    write_model_dir(model_dir, args.tokenizer or args.carry / "tok", True, "cpu", 0)
    tokenizer = load_tokenizer(model_dir)
    if args.quailb:
        from quail_testing.quailb import data
        from quail_testing.quailb.queries import QUERIES

        query = QUERIES[args.quailb]
        paths = data.generate(args.workdir / f"quailb-{args.scale}", args.scale)
        sql, tables = query.sql, list(query.tables)
    else:
        paths = write_corpora(args.workdir / "data", tokenizer, args.docs, args.anchors,
                              args.partners, 0)
        sql = {"filter": FILTER_SQL, "join": JOIN_SQL,
               "complete": decode_sql(args.max_tokens, args.constrained)}[args.workload]
        tables = ["reports", "terms"] if args.workload == "join" else ["docs"]

    token = tokenizer.encode(" the")[-1] if args.workload == "complete" else None
    passes: list | None = [] if args.passes else None
    forward_s = [0.0]

    def load_engine(spec, device="cpu", precision="bf16", tokenizer=None, **_):
        return packing_engine(spec, args.pages, tokenizer, token, passes, args.end_every,
                              args.launches, forward_s)

    # (the session loads through facade's own binding of factory.load_engine: both are
    # replaced, or the query runs the CPU engine and the probe measures that instead)
    factory.load_engine = facade.load = load_engine
    report = args.workdir / f"{args.workload}.report.json"
    cmd = ["query", "-e", sql, "--dialect",
           "snowflake", "--model", str(model_dir), "--no-cache", "--report", str(report), "-q",
           "--output", str(args.workdir / "out.parquet")]
    for t in tables:
        cmd += ["--table", f"{t}={paths[t]}"]
    prof = cProfile.Profile() if args.profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    code = cli_main(cmd)
    if prof:
        prof.disable()
    wall = time.perf_counter() - t0
    rep = json.loads(report.read_text())
    prompts = sum(o.get("prompts", 0) for o in rep["operators"])
    print(json.dumps({"workload": args.quailb or args.workload, "exit": code, "wall_s": round(wall, 2),
                      "load_s": rep["load_s"], "prompts": prompts,
                      "host_us_per_prompt": round(1e6 * (wall - rep["load_s"]) / max(1, prompts)),
                      "requested_tokens": rep["requested_tokens"],
                      "fresh_tokens": sum(o.get("fresh_tokens", 0) for o in rep["operators"]),
                      "kv_hit_tokens": sum(o.get("kv_hit_tokens", 0) for o in rep["operators"]),
                      "decode_tokens": sum(o.get("decode_tokens", 0) for o in rep["operators"]),
                      "preemptions": sum(o.get("preemptions", 0) for o in rep["operators"]),
                      "engine_s": round(sum(o.get("engine_s", 0.0) for o in rep["operators"]), 2),
                      "forward_s": round(forward_s[0], 2), "launches": args.launches,
                      "switch_interval_ms": sys.getswitchinterval() * 1000}))
    if passes:
        print(json.dumps({"passes": _runs(passes)}))
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
    return code


def _runs(passes: list) -> list:
    """Consecutive passes of one kind folded: [kind, count, first size, last size, total]."""
    out: list = []
    for kind, size in passes:
        if out and out[-1][0] == kind:
            out[-1][1] += 1
            out[-1][3] = size
            out[-1][4] += size
        else:
            out.append([kind, 1, size, size, size])
    return out


if __name__ == "__main__":
    raise SystemExit(main())
