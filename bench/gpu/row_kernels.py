"""Warp counts of the one-row-per-program kernels at a full filter pass (65,536 tokens,
Qwen3-4B widths): add_rmsnorm (bf16 and float32 residual, fp8 out) and silu_mul (fp8 out).

    python bench/gpu/row_kernels.py     # writes $OUT/row_kernels.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from bench.gpu.common import Results, bench_ms, setup_logging  # noqa: E402
from quail_kernels.add_rmsnorm import add_rmsnorm  # noqa: E402
from quail_kernels.silu_mul import silu_mul  # noqa: E402

T, H, INTER = 65536, 2560, 9728


def sweep() -> list[dict]:
    rows = []
    w = 1 + 0.1 * torch.randn(H, device="cuda")
    for res_dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
        r = torch.randn(T, H, device="cuda", dtype=res_dtype)
        nbytes = T * H * (2 + 2 * r.element_size() + 1)
        for warps in (2, 4, 8, 16):
            ms = bench_ms(lambda warps=warps, x=x, r=r: add_rmsnorm(x, r, w, 1e-6, True,
                                                                    num_warps=warps))
            rows.append({"kernel": f"add_rmsnorm_fp8[{str(res_dtype)[6:]} residual]",
                         "warps": warps, "ms": round(ms, 4), "GBps": round(nbytes / ms / 1e6)})
    gu = torch.randn(T, 2 * INTER, device="cuda", dtype=torch.bfloat16)
    for warps in (4, 8, 16, 32):
        ms = bench_ms(lambda warps=warps: silu_mul(gu, True, num_warps=warps))
        rows.append({"kernel": "silu_mul_fp8", "warps": warps, "ms": round(ms, 4),
                     "GBps": round(T * INTER * 5 / ms / 1e6)})
    return rows


def main() -> int:
    setup_logging()
    res = Results("row_kernels.json")
    for row in res.section("sweep", sweep):
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
