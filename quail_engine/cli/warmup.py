"""`quail warmup`: load the model once on its device, before any query needs it. A GGUF is
converted into the models cache; on a GPU the engine's warm-up compiles every Triton kernel
variant a query launches and Triton keeps them under the quail cache root's `kernels/`
(infer/gpu/compile_log.py), so the first query on this machine loads them instead of compiling
them inside its model load. The model's identity (the digests of its files, which key every
cached answer) is computed and remembered too, so the first query does not read the weights
once more to hash them. Run once after installing (or at image build); the kernels folder can
also be copied to machines of the same GPU, Triton and CUDA."""

from __future__ import annotations

import argparse
import json
import time

from quail_engine.exec import SessionConfig, load_engine
from quail_engine.infer.gpu import compile_log
from quail_engine.infer.model_ref import ModelRef
from quail_engine.settings import DEFAULT_PRECISION, PRECISIONS


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("warmup", help="load the model once: convert it and compile its GPU "
                                      "kernels ahead of the first query")
    p.add_argument("--model", default="default",
                   help="default | gemma3-270m | smollm2-135m | a .gguf file | a model dir")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--precision", default=DEFAULT_PRECISION, choices=PRECISIONS,
                   help="the precision queries will run at (its kernels are the ones compiled)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    config = SessionConfig(model=args.model, device=args.device, precision=args.precision,
                           progress=False)
    before = compile_log.cache_inventory()
    start = time.perf_counter()
    load_engine(config)
    count, seconds = compile_log.totals()
    loaded = time.perf_counter()
    ModelRef.resolve(args.model)  # (its identity: the files' digests, remembered)
    identity_s = time.perf_counter() - loaded
    result = {"model": args.model, "device": config.engine_device.name,
              "precision": args.precision, "load_s": round(loaded - start, 2),
              "identity_s": round(identity_s, 2),
              "kernels_compiled_or_loaded": count, "kernel_s": round(seconds, 2),
              "kernel_cache_before": before, "kernel_cache": compile_log.cache_inventory()}
    if args.json:
        print(json.dumps(result))
        return 0
    cache = result["kernel_cache"]
    print(f"model {args.model} loaded on {result['device']} in {result['load_s']} s "
          f"(its identity in {result['identity_s']} s); "
          f"{count} GPU kernels compiled or loaded in {result['kernel_s']} s; kernel cache "
          f"{cache['dir']}: {cache['kernels']} kernels (was {before['kernels']})")
    return 0
