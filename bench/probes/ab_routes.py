"""A/B of an attention route on whole QUAIL-B queries, in one process on one machine: each query
runs with the route on, off, on again (the first run pays the one-time costs: Triton compiles,
cuDNN graphs), through the product's session as the timed table runs it (random-weight model,
the override). Per run: `run_s` as in the table, and the GPU passes' seconds.

Route `causal`: long sequences' own attention on cuDNN (quail_engine/infer/gpu/attention.py,
`LibAttention.causal`) vs all on the Triton kernel.

    python -m bench.probes.ab_routes --ids BIO-1,AGENT-2 [--order on,off,on]
                                                     # writes $OUT/ab_routes.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from quail_testing.gpu import setup_logging
from quail_testing.results import Results


def gpu_model(engine: Any):
    """The GpuCausalLM under the bench's wrapped engines."""
    while engine is not None:
        model = vars(engine).get("model") if hasattr(engine, "__dict__") else None
        if model is not None and hasattr(model, "lib_attention"):
            return model
        engine = vars(engine).get("_engine") if hasattr(engine, "__dict__") else None
    raise RuntimeError("no GPU model under the engine")


def run_ab(args) -> dict:
    from bench.probes.profile_query import device_suite
    from bench.quailb.run import _cases

    work = Path(args.workdir)
    suite = device_suite(args)
    model = gpu_model(suite.engine[0])
    routed = model.lib_attention
    if routed is None or routed.causal is None:
        raise RuntimeError("this machine's model has no library causal route to compare")
    plain = dataclasses.replace(routed, causal=None)
    out: dict[str, list] = {}
    try:
        for qid in args.ids.split(","):
            case = _cases([qid], False)[0]
            runs = []
            for setting in args.order.split(","):
                model.lib_attention = routed if setting == "on" else plain
                shutil.rmtree(work / "answers", ignore_errors=True)  # no cached answers
                row = suite.run(case)
                runs.append({"causal_route": setting, "run_s": row.get("run_s"),
                             "gpu_pass_s": round(sum(o.get("gpu_pass_s") or 0.0 for o in
                                                     (suite.last_report or {}).get(
                                                         "operators", [])), 3),
                             "rows": row.get("rows"), "digest": row.get("digest"),
                             "fresh_tokens": row.get("fresh_tokens"), "error": row.get("error")})
                print(qid, json.dumps(runs[-1]), flush=True)
            out[case.id] = runs
    finally:
        model.lib_attention = routed
        shutil.rmtree(work / "answers", ignore_errors=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ids", required=True)
    p.add_argument("--order", default="on,off,on")
    p.add_argument("--scale", default="0.1")
    p.add_argument("--random-model", default="qwen3-4b")
    p.add_argument("--precision", default="fp8")
    p.add_argument("--workdir", default="/tmp/quail-e2e")
    args = p.parse_args(argv)
    setup_logging()
    Results("ab_routes.json").section("ab", run_ab, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
