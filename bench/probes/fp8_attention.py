"""Probe: cuDNN's fp8 fused attention (through the nvidia-cudnn-frontend Python graph API, which
torch does not expose) at the join's shape: 16,384 suffix queries x one 4,096-key anchor,
Qwen3-4B heads (32 q / 8 kv, d = 128), non-causal, with the log-sum-exp. Per-tensor scales: q,
k, v by their amax / 448; softmax probabilities by 448 (they lie in [0, 1]); the output by
448 / max |v| (every output row is a convex mix of V rows). Against torch's bf16 cuDNN op on the
same inputs: time, TFLOP/s, output and LSE error.

The frontend is not a dependency of the project: carry its wheel (see the device README) and
    PYTHONPATH=/tmp/site python -m bench.probes.fp8_attention     # writes $OUT/fp8_attention.json
"""

from __future__ import annotations

import traceback

import torch

from bench.gpu.common import bench_ms, setup_logging
from bench.results_io import Results

NQ, NK, HQ, HKV, D = 16384, 4096, 32, 8, 128
SCALE = D ** -0.5
FLOPS = 4 * NQ * NK * HQ * D
E4M3 = torch.float8_e4m3fn


def _bhsd_dims(t: torch.Tensor):
    """[S, H, D] contiguous -> cuDNN (1, H, S, D) dims and strides over the same memory."""
    s, h, d = t.shape
    return [1, h, s, d], [s * h * d, d, h * d, 1]


def _inputs():
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(NQ, HQ, D, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(NK, HKV, D, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(NK, HKV, D, device="cuda", dtype=torch.bfloat16, generator=g)
    return q, k, v


def reference(q, k, v) -> dict:
    aten = torch.ops.aten

    def call():
        return aten._scaled_dot_product_cudnn_attention(
            q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], None,
            True, 0.0, False, False, scale=SCALE)
    res = call()
    ms = bench_ms(call)
    return {"o": res[0][0].transpose(0, 1).float(), "lse": res[1].reshape(HQ, NQ).t().float(),
            "row": {"variant": "bf16 cuDNN (torch op)", "ms": round(ms, 3),
                    "tflops": round(FLOPS / ms / 1e9, 1)}}


def fp8(q, k, v, heads_kv: int) -> tuple[dict, torch.Tensor, torch.Tensor]:
    import cudnn
    if heads_kv != HKV:  # K/V repeated per query head
        k = k.repeat_interleave(HQ // HKV, dim=1).contiguous()
        v = v.repeat_interleave(HQ // HKV, dim=1).contiguous()
    amax = {n: float(t.abs().amax()) for n, t in (("q", q), ("k", k), ("v", v))}
    desc = {n: a / 448.0 for n, a in amax.items()}
    q8, k8, v8 = ((t.float() / desc[n]).to(E4M3).contiguous()
                  for n, t in (("q", q), ("k", k), ("v", v)))
    scale_s, scale_o = 448.0, 448.0 / amax["v"]
    one = lambda x: torch.full((1, 1, 1, 1), x, device="cuda", dtype=torch.float32)  # noqa: E731
    scalars = {"descale_q": one(desc["q"]), "descale_k": one(desc["k"]),
               "descale_v": one(desc["v"]), "descale_s": one(1.0 / scale_s),
               "scale_s": one(scale_s), "scale_o": one(scale_o)}
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.FP8_E4M3,
                          intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    tens = {}
    for name, t in (("q", q8), ("k", k8), ("v", v8)):
        dims, strides = _bhsd_dims(t)
        tens[name] = graph.tensor(name=name, dim=dims, stride=strides,
                                  data_type=cudnn.data_type.FP8_E4M3)
    for name in scalars:
        tens[name] = graph.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1],
                                  data_type=cudnn.data_type.FLOAT)
    o_t, stats_t, amax_s_t, amax_o_t = graph.sdpa_fp8(
        q=tens["q"], k=tens["k"], v=tens["v"], descale_q=tens["descale_q"],
        descale_k=tens["descale_k"], descale_v=tens["descale_v"], descale_s=tens["descale_s"],
        scale_s=tens["scale_s"], scale_o=tens["scale_o"], generate_stats=True,
        attn_scale=SCALE, use_causal_mask=False, name="sdpa_fp8")
    o8 = torch.empty(NQ, HQ, D, device="cuda", dtype=E4M3)
    dims, strides = _bhsd_dims(o8)
    o_t.set_output(True).set_dim(dims).set_stride(strides).set_data_type(
        cudnn.data_type.FP8_E4M3)
    stats = torch.empty(1, HQ, NQ, 1, device="cuda", dtype=torch.float32)
    stats_t.set_output(True).set_dim(list(stats.shape)).set_stride(
        list(stats.stride())).set_data_type(cudnn.data_type.FLOAT)
    amax_s, amax_o = one(0.0), one(0.0)
    for t in (amax_s_t, amax_o_t):
        t.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(
            cudnn.data_type.FLOAT)
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans()
    workspace = torch.empty(graph.get_workspace_size(), device="cuda", dtype=torch.uint8)
    pack = {tens["q"]: q8, tens["k"]: k8, tens["v"]: v8, o_t: o8, stats_t: stats,
            amax_s_t: amax_s, amax_o_t: amax_o, **{tens[n]: t for n, t in scalars.items()}}

    def call():
        graph.execute(pack, workspace, handle=handle)
    call()
    torch.cuda.synchronize()
    ms = bench_ms(call)
    o = o8.float() / scale_o
    row = {"variant": f"fp8 cuDNN (frontend, {'GQA' if heads_kv == HKV else 'K/V repeated'})",
           "ms": round(ms, 3), "tflops": round(FLOPS / ms / 1e9, 1),
           "amax_s": float(amax_s), "amax_o": float(amax_o), "frontend": cudnn.__version__,
           "backend": cudnn.backend_version()}
    return row, o, stats.reshape(HQ, NQ).t()


def main() -> int:
    setup_logging()
    res = Results("fp8_attention.json")
    q, k, v = _inputs()
    ref = reference(q, k, v)
    rows = [ref["row"]]
    for heads_kv in (HKV, HQ):
        try:
            row, o, lse = fp8(q, k, v, heads_kv)
            row["o_rel_err_vs_bf16"] = float((o - ref["o"]).norm() / ref["o"].norm())
            diff = (lse - ref["lse"]).abs()
            row["lse_max_abs_diff_vs_bf16"] = float(diff.max())
            row["lse_mean_diff_vs_bf16"] = float((lse - ref["lse"]).mean())
            rows.append(row)
        except Exception as exc:  # noqa: BLE001  (a missing capability is a result)
            rows.append({"variant": f"fp8 heads_kv={heads_kv}",
                         "error": f"{type(exc).__name__}: {str(exc)[:600]}",
                         "trace": traceback.format_exc()[-2500:]})
        res.data["rows"] = rows
        res.path.write_text(__import__("json").dumps(res.data, indent=1, default=str))
    for row in rows:
        print({k: v for k, v in row.items() if k != "trace"})
        if "trace" in row:
            print(row["trace"][-1500:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
