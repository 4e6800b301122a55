"""Launch shapes of the filter pass's non-GEMM kernels at a full pass (65,536 tokens, Qwen3-4B
widths): add_rmsnorm (rows per program x warps, fp8 out with a bf16 residual; bf16 out with a
float32 one), silu_mul (warps), qk_norm_rope (heads per program x warps) and the varlen
attention's blocks on q/k/v strided inside one QKV buffer, as in the model (200 documents of
220-420 tokens).

    python -m bench.probes.row_kernels     # writes $OUT/row_kernels.json
"""

from __future__ import annotations

import torch

from quail_kernels.add_rmsnorm import add_rmsnorm
from quail_kernels.qk_norm_rope import qk_norm_rope, rope_cos_sin
from quail_kernels.silu_mul import silu_mul
from quail_kernels.varlen_attention import varlen_attention
from quail_testing.gpu import bench_ms, setup_logging
from quail_testing.results import Results

T, H, INTER, HQ, HKV, D = 65536, 2560, 9728, 32, 8, 128


def _row(kernel: str, ms: float, nbytes: float, **params) -> dict:
    return {"kernel": kernel, **params, "ms": round(ms, 4), "GBps": round(nbytes / ms / 1e6)}


def norms() -> list[dict]:
    rows = []
    w = 1 + 0.1 * torch.randn(H, device="cuda")
    for res_dtype, fp8 in ((torch.bfloat16, True), (torch.float32, False)):
        x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
        r = torch.randn(T, H, device="cuda", dtype=res_dtype)
        nbytes = T * H * (2 + 2 * r.element_size() + (1 if fp8 else 2))
        name = f"add_rmsnorm[{'fp8' if fp8 else 'bf16'} out, {str(res_dtype)[6:]} residual]"
        for rows_per in (1, 2, 4):
            for warps in (2, 4, 8, 16):
                ms = bench_ms(lambda: add_rmsnorm(x, r, w, 1e-6, fp8, torch.bfloat16,  # noqa: B023
                                                  num_warps=warps, rows_per_program=rows_per))  # noqa: B023
                rows.append(_row(name, ms, nbytes, rows_per_program=rows_per, warps=warps))
    gu = torch.randn(T, 2 * INTER, device="cuda", dtype=torch.bfloat16)
    for warps in (8, 16):
        ms = bench_ms(lambda warps=warps: silu_mul(gu, True, num_warps=warps))
        rows.append(_row("silu_mul_fp8", ms, T * INTER * 5, warps=warps))
    qkv = torch.randn(T, (HQ + 2 * HKV) * D, device="cuda", dtype=torch.bfloat16)
    pos = torch.randint(0, 4096, (T,), device="cuda")
    cs = rope_cos_sin(8192, D, 1e6, "cuda")
    qn, kn = 1 + 0.1 * torch.randn(D, device="cuda"), 1 + 0.1 * torch.randn(D, device="cuda")
    for hb in (8, 4, 2):
        for warps in (1, 2, 4, 8):
            ms = bench_ms(lambda: qk_norm_rope(qkv, pos, cs, qn, kn, HQ, HKV,  # noqa: B023
                                               heads_per_program=hb, num_warps=warps))  # noqa: B023
            rows.append(_row("qk_norm_rope", ms, T * (HQ + HKV) * D * 4,
                             heads_per_program=hb, warps=warps))
    return rows


def attention() -> list[dict]:
    g = torch.Generator().manual_seed(0)
    lengths = (torch.randint(200, 401, (200,), generator=g) + 20).tolist()
    total = sum(lengths)
    qkv = torch.randn(total, (HQ + 2 * HKV) * D, device="cuda", dtype=torch.bfloat16)
    heads = qkv.view(total, HQ + 2 * HKV, D)
    q, k, v = heads[:, :HQ], heads[:, HQ:HQ + HKV], heads[:, HQ + HKV:]
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32,
                      device="cuda")
    mx = max(lengths)
    flops = sum(4 * n * (n + 1) / 2 * HQ * D for n in lengths)
    ref = varlen_attention(q, k, v, cu, mx, D ** -0.5)[0]
    rows = []
    for blocks in ((64, 64, 4, 3), (64, 64, 4, 2), (64, 64, 4, 1), (64, 32, 4, 2),
                   (64, 32, 4, 3), (128, 64, 8, 2), (128, 64, 4, 2), (128, 32, 4, 2),
                   (32, 32, 4, 2), (64, 128, 4, 2), (128, 128, 8, 2)):
        try:
            out = varlen_attention(q, k, v, cu, mx, D ** -0.5, blocks=blocks)[0]
            ms = bench_ms(lambda: varlen_attention(q, k, v, cu, mx, D ** -0.5, blocks=blocks))  # noqa: B023
            err = float((out.float() - ref.float()).norm() / ref.float().norm())
            rows.append({"kernel": "varlen_in_qkv", "blocks": list(blocks), "ms": round(ms, 4),
                         "tflops": round(flops / ms / 1e9, 1), "rel_diff_vs_default": err})
        except Exception as exc:  # noqa: BLE001  (a config that does not fit is a result)
            rows.append({"kernel": "varlen_in_qkv", "blocks": list(blocks),
                         "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
    return rows


def main() -> int:
    setup_logging()
    res = Results("row_kernels.json")
    for key, fn in (("norms", norms), ("attention", attention)):
        for row in res.section(key, fn) or []:
            print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
