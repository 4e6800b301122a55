"""Device check in one command: ceilings, kernels at real shapes (error + time + block-size
variants), layer GEMMs bf16 vs fp8, and model-level correctness vs the plain-torch path.

    PYTHONPATH=. python tests/device/check.py [--shapes qwen3-4b,smollm2-135m] [--prompts 400]
"""

from __future__ import annotations

import argparse
import json

import kernel_check
import model_check

from quail_testing.gpu import env_info, measure_ceilings, setup_logging
from quail_testing.results import Results


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="qwen3-4b,smollm2-135m,gemma3-270m")
    p.add_argument("--prompts", type=int, default=400)
    p.add_argument("--skip", default="")
    p.add_argument("--anchor-len", default="1500,2500",
                   help="prefix check anchor lengths lo,hi (long enough for the cuDNN split)")
    args = p.parse_args(argv)
    setup_logging()
    res = Results("check.json")
    res.section("env", env_info)
    skip = set(args.skip.split(","))
    if "ceilings" not in skip:
        res.section("ceilings", measure_ceilings)
    if "kernels" not in skip:
        res.section("kernels_norms", kernel_check.norms)
        res.section("kernels_attention", kernel_check.attention)
        res.section("gemms", kernel_check.gemms)
    for shape in args.shapes.split(","):
        if shape:
            lo, hi = (int(x) for x in args.anchor_len.split(","))
            res.section(f"model_{shape}", model_check.check_shape, shape, args.prompts, 0,
                        (lo, hi))
    d = res.data
    print(json.dumps({k: d[k] for k in ("env", "ceilings") if k in d}))
    for key in ("kernels_norms", "kernels_attention", "gemms"):
        for row in d.get(key, []) if isinstance(d.get(key), list) else [d.get(key)]:
            print(json.dumps(row)[:300])
    for shape in args.shapes.split(","):
        m = d.get(f"model_{shape}", {})
        for dt in ("plain_torch_bf16", "bf16", "bf16_bf16residual", "fp8", "fp8_fp32residual",
                   "fp8_mlp_only"):
            if dt in m:
                r = dict(m[dt])
                pv = r.pop("prefix_vs_unshared", {})
                print(shape, dt, json.dumps(r), "prefix:", json.dumps(pv))
        if "error" in m:
            print(shape, "ERROR", m["error"], m.get("trace", "")[-1500:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
