"""Probe: the engine's fp8 attention (`quail_engine.infer.gpu.fp8_attention.Fp8Attention`,
cuDNN's fp8 fused attention through nvidia-cudnn-frontend) against torch's bf16 cuDNN op at the
shapes the engine's library routes feed it (Qwen3-4B heads: 32 q / 8 kv, d = 128): windows of
4,096 partner queries over an anchor's 4k-24k keys (non-causal), and long sequences' own
causal attention at 4k-24k tokens. Per shape: ms and TFLOP/s of each (fp8 with its quantization
of q, k and v included), output error and log-sum-exp difference against bf16.

The frontend is not a dependency of the project: carry its wheel (.carry/cudnn/whl, see
bench/gpu/device_session.sh) and
    PYTHONPATH=/tmp/site:. python -m bench.probes.fp8_attention   # writes $OUT/fp8_attention.json
"""

from __future__ import annotations

import json
import traceback

import torch

from bench.gpu.common import bench_ms, setup_logging
from bench.results_io import Results

HQ, HKV, D = 32, 8, 128
SCALE = D ** -0.5
# (queries, keys, causal)
SHAPES = [(4096, 4096, False), (4096, 12288, False), (4096, 24576, False),
          (4096, 4096, True), (8192, 8192, True), (16384, 16384, True), (24576, 24576, True)]


def flops(nq: int, nk: int, causal: bool) -> float:
    full = 4.0 * nq * nk * HQ * D
    return full / 2 if causal else full


def measure(fp8, bf16, q, k, v, causal: bool) -> dict:
    ref, ref_lse = bf16(q, k, v, SCALE, causal=causal)
    got, lse = fp8(q, k, v, SCALE, causal=causal)
    ms_bf16 = bench_ms(lambda: bf16(q, k, v, SCALE, causal=causal))
    ms_fp8 = bench_ms(lambda: fp8(q, k, v, SCALE, causal=causal))
    f = flops(q.shape[0], k.shape[0], causal)
    return dict(bf16_ms=round(ms_bf16, 3), fp8_ms=round(ms_fp8, 3),
                bf16_tflops=round(f / ms_bf16 / 1e9, 1), fp8_tflops=round(f / ms_fp8 / 1e9, 1),
                speedup=round(ms_bf16 / ms_fp8, 3),
                o_rel_err=float((got.float() - ref.float()).norm() / ref.float().norm()),
                lse_max_abs_diff=float((lse - ref_lse).abs().max()),
                lse_mean_diff=float((lse - ref_lse).mean()))


def main() -> int:
    setup_logging()
    from quail_engine.infer.gpu.attention import cudnn_attend
    from quail_engine.infer.gpu.fp8_attention import Fp8Attention

    res = Results("fp8_attention.json")
    rows = []
    try:
        fp8 = Fp8Attention(torch.device("cuda"), HQ, HKV, D)
        res.data["out_bf16"] = fp8.out_bf16
        import cudnn
        res.data["frontend"], res.data["backend"] = cudnn.__version__, cudnn.backend_version()
    except Exception as exc:  # noqa: BLE001  (a missing capability is a result)
        res.data["error"] = f"{type(exc).__name__}: {exc}"
        res.data["trace"] = traceback.format_exc()[-2500:]
        res.path.write_text(json.dumps(res.data, indent=1, default=str))
        print(res.data)
        return 1
    g = torch.Generator(device="cuda").manual_seed(0)
    for nq, nk, causal in SHAPES:
        q = torch.randn(nq, HQ, D, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(nk, HKV, D, device="cuda", dtype=torch.bfloat16, generator=g)
                for _ in range(2))
        row = {"queries": nq, "keys": nk, "causal": causal}
        try:
            row.update(measure(fp8, cudnn_attend, q, k, v, causal))
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
            row["trace"] = traceback.format_exc()[-2000:]
        rows.append(row)
        print({k: v for k, v in row.items() if k != "trace"}, flush=True)
        res.data["rows"] = rows
        res.path.write_text(json.dumps(res.data, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
