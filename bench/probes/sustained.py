"""The sustained speed of light: the filter pass's four layer GEMMs (Qwen3-4B shape, M = 65,536,
fp8 per-token x per-channel scales with fast accumulation, and bf16) run back to back for
`--seconds` each, TFLOP/s per window of the GPU's own clock. The H200 here holds ~700 W under
this load and lowers its SM clock (run `nvidia-smi ... -lms 1000` beside it to see it), so the
burst ceilings of facts.md (8192^3, a fraction of a second) overstate what a long job gets.

    python -m bench.probes.sustained [--seconds 20]     # writes $OUT/sustained.json
"""

from __future__ import annotations

import argparse
import time

import torch

from quail_testing.gpu import setup_logging
from quail_testing.results import Results

M = 65536
SHAPES = {"qkv": (6144, 2560), "o": (2560, 4096), "gate_up": (19456, 2560), "down": (2560, 9728)}


def _calls(fp8: bool):
    calls = []
    for n, k in SHAPES.values():
        w = torch.randn(n, k, device="cuda") * 0.02
        x = torch.randn(M, k, device="cuda")
        if fp8:
            sw = (w.abs().amax(1, keepdim=True) / 448).t().contiguous()
            sx = x.abs().amax(1, keepdim=True) / 448
            w8 = (w / sw.t()).to(torch.float8_e4m3fn)
            x8 = (x / sx).to(torch.float8_e4m3fn)
            calls.append(lambda x8=x8, w8=w8, sx=sx, sw=sw: torch._scaled_mm(
                x8, w8.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16, use_fast_accum=True))
        else:
            xb, wb = x.bfloat16(), w.bfloat16()
            calls.append(lambda xb=xb, wb=wb: torch.nn.functional.linear(xb, wb))
    return calls


def run(fp8: bool, seconds: float) -> dict:
    calls = _calls(fp8)
    flops_per_round = sum(2 * M * n * k for n, k in SHAPES.values())
    windows = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        rounds = 40
        for _ in range(rounds):
            for c in calls:
                c()
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop)
        windows.append(round(rounds * flops_per_round / ms / 1e9, 1))
    tail = windows[len(windows) // 2:]
    return {"dtype": "fp8" if fp8 else "bf16", "m": M, "windows_tflops": windows,
            "first_window_tflops": windows[0], "second_half_median_tflops":
            sorted(tail)[len(tail) // 2]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=20.0)
    args = p.parse_args(argv)
    setup_logging()
    res = Results("sustained.json")
    for fp8 in (True, False):
        out = res.section("fp8" if fp8 else "bf16", run, fp8, args.seconds)
        print({k: v for k, v in out.items() if k != "windows_tflops"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
