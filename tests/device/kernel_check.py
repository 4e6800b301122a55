"""Kernels on the GPU at real Qwen3-4B shapes: error vs the fp32 reference on upcast inputs,
and median time against the byte/FLOP floor; block-size variants of the attention kernels;
the layer GEMMs in bf16 (cuBLAS) and fp8 (_scaled_mm, row-wise scales)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from quail_kernels.add_rmsnorm import add_rmsnorm, add_rmsnorm_ref
from quail_kernels.lse_merge import lse_merge, lse_merge_ref
from quail_kernels.prefix_attention import prefix_attention, prefix_attention_ref
from quail_kernels.qk_norm_rope import qk_norm_rope, qk_norm_rope_ref, rope_cos_sin
from quail_kernels.silu_mul import silu_mul, silu_mul_ref
from quail_kernels.varlen_attention import varlen_attention, varlen_attention_ref
from quail_testing.gpu import bench_ms

H, HQ, HKV, D, INTER = 2560, 32, 8, 128, 9728
T = 16384


def _err(out, ref) -> float:
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return float("nan")
    return float((out - ref).norm() / ref.norm())


def _deq(q, s):
    return q.float() * s if s is not None else q.float()


def _row(name, err, ms, nbytes=0, flops=0):
    return {"kernel": name, "rel_err": err, "ms": round(ms, 4),
            "GBps": round(nbytes / ms / 1e6, 1) if nbytes else None,
            "tflops": round(flops / ms / 1e9, 1) if flops else None}


def norms() -> list[dict]:
    rows = []
    x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x)
    w = 1 + 0.1 * torch.randn(H, device="cuda")
    for fp8 in (False, True):
        out, res, s = add_rmsnorm(x, r, w, 1e-6, fp8)
        ref, _, rs = add_rmsnorm_ref(x.float(), r.float(), w, 1e-6, False)
        ms = bench_ms(lambda fp8=fp8: add_rmsnorm(x, r, w, 1e-6, fp8))
        rows.append(_row(f"add_rmsnorm{'_fp8' if fp8 else ''}", _err(_deq(out, s), ref), ms,
                         T * H * (2 * 3 + (1 if fp8 else 2))))
    gu = 2 * torch.randn(T, 2 * INTER, device="cuda", dtype=torch.bfloat16)
    for fp8 in (False, True):
        out, s = silu_mul(gu, fp8)
        ref, _ = silu_mul_ref(gu.float())
        ms = bench_ms(lambda fp8=fp8: silu_mul(gu, fp8))
        rows.append(_row(f"silu_mul{'_fp8' if fp8 else ''}", _err(_deq(out, s), ref), ms,
                         T * INTER * (4 + (1 if fp8 else 2))))
    qkv = torch.randn(T, (HQ + 2 * HKV) * D, device="cuda", dtype=torch.bfloat16)
    pos = torch.randint(0, 4096, (T,), device="cuda")
    cs = rope_cos_sin(8192, D, 1e6, "cuda")
    qn, kn = 1 + 0.1 * torch.randn(D, device="cuda"), 1 + 0.1 * torch.randn(D, device="cuda")
    q, k, _ = qk_norm_rope(qkv.clone(), pos, cs, qn, kn, HQ, HKV)
    rq, rk, _ = qk_norm_rope_ref(qkv.float().clone(), pos, cs, qn, kn, HQ, HKV)
    work = qkv.clone()
    ms = bench_ms(lambda: qk_norm_rope(work, pos, cs, qn, kn, HQ, HKV))
    rows.append(_row("qk_norm_rope", max(_err(q, rq), _err(k, rk)), ms, T * (HQ + HKV) * D * 4))
    o1, o2 = (torch.randn(T, HQ, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    l1, l2 = (3 * torch.randn(T, HQ, device="cuda") for _ in range(2))
    for fp8 in (False, True):
        out, s = lse_merge(o1, l1, o2, l2, fp8)
        ref, _ = lse_merge_ref(o1.float(), l1, o2.float(), l2)
        ms = bench_ms(lambda fp8=fp8: lse_merge(o1, l1, o2, l2, fp8))
        rows.append(_row(f"lse_merge{'_fp8' if fp8 else ''}", _err(_deq(out, s), ref), ms,
                         T * HQ * (D * (4 + (1 if fp8 else 2)) + 8)))
    return rows


ATTN_BLOCKS = [(64, 64, 4, 3), (64, 64, 4, 4), (64, 128, 4, 3), (64, 128, 8, 3),
               (128, 64, 8, 3), (128, 128, 8, 3), (64, 32, 4, 4), (32, 64, 4, 3)]


def attention() -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(200, 400, (54,), generator=g).tolist()
    total = sum(lengths)
    q = torch.randn(total, HQ, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(total, HKV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(total, HKV, D, device="cuda", dtype=torch.bfloat16)
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32,
                      device="cuda")
    flops = sum(4 * n * (n + 1) / 2 * HQ * D for n in lengths)
    ref, ref_lse = varlen_attention_ref(q.float(), k.float(), v.float(), cu, max(lengths), D ** -0.5)
    for blocks in ATTN_BLOCKS:
        try:
            out, lse = varlen_attention(q, k, v, cu, max(lengths), D ** -0.5, blocks)
            ms = bench_ms(lambda b=blocks: varlen_attention(q, k, v, cu, max(lengths), D ** -0.5, b))
            row = _row(f"varlen_attention{blocks}", _err(out, ref), ms, flops=flops)
            row["lse_max_abs_err"] = float((lse - ref_lse).abs().max())
        except Exception as exc:
            row = {"kernel": f"varlen_attention{blocks}", "error": str(exc)[:300]}
        rows.append(row)
    anchor, num_q, page = 4096, 1100 * 15, 64
    kc = torch.randn(anchor // page + 4, page, HKV, D, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    table = torch.randperm(kc.shape[0], device="cuda")[: anchor // page].int()[None].contiguous()
    qp = torch.randn(num_q, HQ, D, device="cuda", dtype=torch.bfloat16)
    seg = torch.tensor([0, num_q], dtype=torch.int32, device="cuda")
    plen = torch.tensor([anchor], dtype=torch.int32, device="cuda")
    flops = 4 * num_q * anchor * HQ * D
    ref, _ = prefix_attention_ref(qp[:2048].float(), kc.float(), vc.float(),
                                  torch.tensor([0, 2048], dtype=torch.int32, device="cuda"),
                                  table, plen, 2048, D ** -0.5)
    for blocks in ATTN_BLOCKS:
        try:
            out, _ = prefix_attention(qp, kc, vc, seg, table, plen, num_q, D ** -0.5, blocks)
            ms = bench_ms(lambda b=blocks: prefix_attention(qp, kc, vc, seg, table, plen, num_q,
                                                            D ** -0.5, b))
            rows.append(_row(f"prefix_attention{blocks}", _err(out[:2048], ref), ms, flops=flops))
        except Exception as exc:
            rows.append({"kernel": f"prefix_attention{blocks}", "error": str(exc)[:300]})
    return rows


def gemms(m: int = T) -> list[dict]:
    from quail_engine.infer.gpu.linear import GpuLinear
    rows = []
    shapes = {"qkv": ((HQ + 2 * HKV) * D, H), "o": (H, HQ * D), "gate_up": (2 * INTER, H),
              "down": (H, INTER)}
    for name, (n, kdim) in shapes.items():
        w = torch.randn(n, kdim, device="cuda", dtype=torch.bfloat16) * 0.02
        x = torch.randn(m, kdim, device="cuda", dtype=torch.bfloat16)
        flops = 2 * m * n * kdim
        ms16 = bench_ms(lambda w=w, x=x: F.linear(x, w))
        lin = GpuLinear(w, fp8=True)
        x8, sx = add_rmsnorm(x, None, torch.ones(kdim, device="cuda"), 1e-6, True)[0::2]
        ms8 = bench_ms(lambda lin=lin, x8=x8, sx=sx: lin(x8, sx))
        ref = F.linear(add_rmsnorm_ref(x, None, torch.ones(kdim, device="cuda"), 1e-6)[0].float(),
                       w.float())
        rows.append({"gemm": name, "m": m, "n": n, "k": kdim,
                     "bf16_tflops": round(flops / ms16 / 1e9, 1),
                     "fp8_tflops": round(flops / ms8 / 1e9, 1),
                     "fp8_rel_err": _err(lin(x8, sx), ref)})
    return rows
