"""Library kernels against ours at the Qwen3-4B shapes of the two workloads: attention with the
log-sum-exp from torch's cuDNN and FlashAttention-2 ops versus our Triton kernels, and the fp8
GEMMs with and without cuBLASLt's fast accumulation. Each row: time, rate, error against our
kernel's output (and, where cheap, against the fp32 reference). Used to choose the backends of
the GPU path (quail_engine/infer/gpu/attention.py).

    python -m bench.probes.backends [--only new_shapes|ragged]   # writes $OUT/gpu-h200-backends.json
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from quail_kernels.prefix_attention import prefix_attention, prefix_attention_ref
from quail_kernels.varlen_attention import varlen_attention, varlen_attention_ref
from quail_testing.gpu import bench_ms, env_info, measure_ceilings, setup_logging
from quail_testing.results import Results

HQ, HKV, D = 32, 8, 128
SCALE = D ** -0.5
aten = torch.ops.aten


def _err(out, ref) -> float:
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return float("nan")
    return float((out - ref).norm() / ref.norm())


def _lse_err(lse, ref) -> float:
    return float((lse.float() - ref.float()).abs().max())


def _row(name, ms, flops, out=None, ref=None, lse=None, ref_lse=None, **extra) -> dict:
    row = {"variant": name, "ms": round(ms, 4), "tflops": round(flops / ms / 1e9, 1)}
    if out is not None:
        row["rel_err_vs_ours"] = _err(out, ref)
    if lse is not None:
        row["lse_max_abs_diff_vs_ours"] = _lse_err(lse, ref_lse)
    row.update(extra)
    return row


def _try(rows: list, name: str, fn):
    try:
        rows.append(fn())
    except Exception as exc:  # a backend missing on this build is a result, not a crash
        rows.append({"variant": name, "error": f"{type(exc).__name__}: {str(exc)[:400]}"})


def _bhsd(x: torch.Tensor) -> torch.Tensor:
    """[T, H, D] -> [1, H, T, D] view (no copy)."""
    return x.transpose(0, 1).unsqueeze(0)


def _heads_rep(x: torch.Tensor) -> torch.Tensor:
    """[T, Hkv, D] -> [T, Hq, D] (GQA keys repeated per query head)."""
    return x.repeat_interleave(HQ // HKV, dim=1)


def _dense_variants(rows, q, k, v, ours_o, ours_lse, flops, causal: bool):
    """cuDNN and flash SDPA ops on one dense sequence (q [T,Hq,D], k/v [S,Hkv,D])."""
    def cudnn(rep: bool):
        kk, vv = (_heads_rep(k), _heads_rep(v)) if rep else (k, v)
        call = lambda: aten._scaled_dot_product_cudnn_attention(  # noqa: E731
            _bhsd(q), _bhsd(kk), _bhsd(vv), None, True, 0.0, causal, False, scale=SCALE)
        res = call()
        o = res[0][0].transpose(0, 1)
        lse = res[1].reshape(HQ, -1).t()
        ms = bench_ms(call)
        if rep:  # the engine would repeat K/V once per layer: time it with the call
            ms += bench_ms(lambda: (_heads_rep(k), _heads_rep(v)))
        return _row(f"cudnn{'_rep' if rep else '_gqa'}", ms, flops, o, ours_o, lse, ours_lse,
                    lse_shape=list(res[1].shape))

    def flash():
        kk, vv = _heads_rep(k), _heads_rep(v)
        call = lambda: aten._scaled_dot_product_flash_attention(  # noqa: E731
            _bhsd(q), _bhsd(kk), _bhsd(vv), 0.0, causal, False, scale=SCALE)
        res = call()
        o = res[0][0].transpose(0, 1)
        lse = res[1].reshape(HQ, -1).t()
        ms = bench_ms(call) + bench_ms(lambda: (_heads_rep(k), _heads_rep(v)))
        return _row("flash_sdpa_rep", ms, flops, o, ours_o, lse, ours_lse)

    def fa2_varlen():
        cu_q = torch.tensor([0, q.shape[0]], dtype=torch.int32, device="cuda")
        cu_k = torch.tensor([0, k.shape[0]], dtype=torch.int32, device="cuda")
        call = lambda: aten._flash_attention_forward(  # noqa: E731
            q, k, v, cu_q, cu_k, q.shape[0], k.shape[0], 0.0, causal, False, scale=SCALE)
        res = call()
        lse = res[1].reshape(HQ, -1).t() if res[1].dim() == 2 else res[1].reshape(HQ, -1).t()
        return _row("fa2_varlen_gqa", bench_ms(call), flops, res[0], ours_o, lse, ours_lse,
                    lse_shape=list(res[1].shape))

    _try(rows, "cudnn_gqa", lambda: cudnn(False))
    _try(rows, "cudnn_rep", lambda: cudnn(True))
    _try(rows, "flash_sdpa_rep", flash)
    _try(rows, "fa2_varlen_gqa", fa2_varlen)


def prefix(num_q: int = 16500, anchor: int = 4096, page: int = 64) -> list[dict]:
    """Suffix queries of 1,100 partners against one 4,096-token anchor (every key visible)."""
    kc = torch.randn(anchor // page, page, HKV, D, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    table = torch.arange(anchor // page, device="cuda", dtype=torch.int32)[None].contiguous()
    q = torch.randn(num_q, HQ, D, device="cuda", dtype=torch.bfloat16)
    seg = torch.tensor([0, num_q], dtype=torch.int32, device="cuda")
    plen = torch.tensor([anchor], dtype=torch.int32, device="cuda")
    flops = 4 * num_q * anchor * HQ * D
    call = lambda: prefix_attention(q, kc, vc, seg, table, plen, num_q, SCALE)  # noqa: E731
    o, lse = call()
    rows = [_row("ours_triton_paged", bench_ms(call), flops)]
    ref, ref_lse = prefix_attention_ref(q[:1024].float(), kc.float(), vc.float(),
                                        torch.tensor([0, 1024], dtype=torch.int32, device="cuda"),
                                        table, plen, 1024, SCALE)
    rows[0]["rel_err_vs_fp32"] = _err(o[:1024], ref)
    rows[0]["lse_max_abs_err_vs_fp32"] = _lse_err(lse[:1024], ref_lse)
    k, v = kc.flatten(0, 1), vc.flatten(0, 1)
    _dense_variants(rows, q, k, v, o, lse, flops, causal=False)
    return rows


def causal_anchor(n: int = 4096) -> list[dict]:
    q = torch.randn(n, HQ, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(n, HKV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    cu = torch.tensor([0, n], dtype=torch.int32, device="cuda")
    flops = 4 * n * (n + 1) / 2 * HQ * D
    call = lambda: varlen_attention(q, k, v, cu, n, SCALE)  # noqa: E731
    o, lse = call()
    rows = [_row("ours_triton", bench_ms(call), flops)]
    _dense_variants(rows, q, k, v, o, lse, flops, causal=True)
    return rows


def varlen(lengths: list[int], label: str) -> list[dict]:
    total = sum(lengths)
    q = torch.randn(total, HQ, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(total, HKV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32,
                      device="cuda")
    mx = max(lengths)
    flops = sum(4 * n * (n + 1) / 2 * HQ * D for n in lengths)
    call = lambda: varlen_attention(q, k, v, cu, mx, SCALE)  # noqa: E731
    o, lse = call()
    rows = [_row(f"ours_triton[{label}]", bench_ms(call), flops)]
    few = int(cu[min(8, len(lengths))])
    ref, ref_lse = varlen_attention_ref(q[:few].float(), k[:few].float(), v[:few].float(),
                                        cu[: min(8, len(lengths)) + 1], mx, SCALE)
    rows[0]["rel_err_vs_fp32"] = _err(o[:few], ref)

    def fa2():
        c = lambda: aten._flash_attention_forward(  # noqa: E731
            q, k, v, cu, cu, mx, mx, 0.0, True, False, scale=SCALE)
        res = c()
        lse2 = res[1].reshape(HQ, -1).t()
        return _row(f"fa2_varlen[{label}]", bench_ms(c), flops, res[0], o, lse2, lse,
                    lse_shape=list(res[1].shape))
    _try(rows, f"fa2_varlen[{label}]", fa2)
    return rows


def _gemm_row(name: str, m: int, n: int, kdim: int) -> dict:
    w = torch.randn(n, kdim, device="cuda") * 0.02
    x = torch.randn(m, kdim, device="cuda")
    sw = w.abs().amax(1, keepdim=True) / 448
    sx = x.abs().amax(1, keepdim=True) / 448
    w8, x8 = (w / sw).to(torch.float8_e4m3fn), (x / sx).to(torch.float8_e4m3fn)
    ref = (x8.float() * sx) @ (w8.float() * sw).t()  # same quantized inputs, fp32 math
    sb = sw.t().contiguous()
    row = {"gemm": name, "m": m, "n": n, "k": kdim}
    flops = 2 * m * n * kdim
    for fast in (False, True):
        def call(fast=fast):
            return torch._scaled_mm(x8, w8.t(), scale_a=sx, scale_b=sb,
                                    out_dtype=torch.bfloat16, use_fast_accum=fast)
        key = "fast" if fast else "exact"
        row[f"fp8_{key}_tflops"] = round(flops / bench_ms(call) / 1e9, 1)
        row[f"fp8_{key}_accum_rel_err"] = _err(call(), ref)
    xb, wb = x.bfloat16(), w.bfloat16()
    row["bf16_tflops"] = round(flops / bench_ms(lambda: F.linear(xb, wb)) / 1e9, 1)
    return row


def gemms() -> list[dict]:
    shapes = {"qkv": (6144, 2560), "o": (2560, 4096), "gate_up": (19456, 2560),
              "down": (2560, 9728)}
    return [_gemm_row(name, m, n, k) for m in (16384, 65536) for name, (n, k) in shapes.items()]


def cudnn_new_shapes(num: int = 8) -> list[dict]:
    """Host cost of a cuDNN call at a shape not seen before (plan build) vs a repeat, with q
    a strided view into a fused QKV buffer as in the model."""
    import time
    rows = []
    for i in range(num):
        lq, lk = 16000 + 13 * i, 3500 + 97 * i
        qkv = torch.randn(lq, (HQ + 2 * HKV) * D, device="cuda", dtype=torch.bfloat16)
        q = qkv[:, : HQ * D].view(lq, HQ, D)
        k = torch.randn(lk, HKV, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)

        def call(q=q, k=k, v=v):
            return aten._scaled_dot_product_cudnn_attention(
                _bhsd(q), _bhsd(k), _bhsd(v), None, True, 0.0, False, False, scale=SCALE)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        res = call()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        ms = bench_ms(call, warmup=3, rep=10)
        o = res[0][0].transpose(0, 1)
        rows.append({"lq": lq, "lk": lk, "first_call_ms": round(first * 1e3, 2),
                     "repeat_ms": round(ms, 3), "out_strides": list(o.stride()),
                     "lse_strides": list(res[1].stride())})
    return rows


def _ragged_lse(lse: torch.Tensor, total: int) -> torch.Tensor:
    """cuDNN's ragged LSE -> [T, Hq] whatever its layout ([T, H], [H, T] or with a batch dim)."""
    lse = lse.squeeze(0) if lse.dim() == 3 else lse
    return lse if lse.shape[0] == total else lse.t()


def _compare(row: dict, res, o, lse, total: int) -> None:
    """Errors against ours, recorded beside the timing; on torch 2.11 the layouts guessed here
    did not match (first run: a size mismatch), so a failed comparison is kept as text."""
    try:
        row["rel_err_vs_ours"] = _err(res[0].reshape(o.shape), o)
        row["lse_max_abs_diff_vs_ours"] = _lse_err(_ragged_lse(res[1], total), lse)
    except RuntimeError as exc:
        row["compare_error"] = str(exc)[:200]


def _cu(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32,
                        device="cuda")


def _cudnn_ragged(q, k, v, cu_q, cu_k, max_q, max_k, causal):
    return aten._cudnn_attention_forward(q, k, v, None, cu_q, cu_k, max_q, max_k, True, 0.0,
                                         causal, False, scale=SCALE)


def ragged() -> dict:
    """cuDNN's ragged (THD) attention through aten._cudnn_attention_forward: the filter's
    packed causal documents, the join's suffixes over exact-length anchors (no key grain, no
    query windows), the suffixes' own causal part, and the cost of new shapes."""
    import time
    g = torch.Generator().manual_seed(0)
    out = {}

    def causal_case(lengths, label):
        total, mx = sum(lengths), max(lengths)
        q = torch.randn(total, HQ, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(total, HKV, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        cu = _cu(lengths)
        flops = sum(4 * n * (n + 1) / 2 * HQ * D for n in lengths)
        o, lse = varlen_attention(q, k, v, cu, mx, SCALE)
        rows = [_row("ours_triton", bench_ms(lambda: varlen_attention(q, k, v, cu, mx, SCALE)),
                     flops)]

        def lib():
            res = _cudnn_ragged(q, k, v, cu, cu, mx, mx, True)
            row = _row("cudnn_ragged", bench_ms(
                lambda: _cudnn_ragged(q, k, v, cu, cu, mx, mx, True)), flops,
                out_shape=list(res[0].shape), lse_shape=list(res[1].shape),
                lse_strides=list(res[1].stride()))
            _compare(row, res, o, lse, total)
            return row
        _try(rows, "cudnn_ragged", lib)
        out[label] = rows

    causal_case(torch.randint(200, 401, (220,), generator=g).tolist(), "filter_220x200-400")
    causal_case(torch.randint(10, 21, (1100,), generator=g).tolist(), "suffix_1100x10-20")
    causal_case([4039], "anchor_4039")

    # join: one or four anchors of exact (non-grain) length, their suffix rows ragged
    for n_seg in (1, 4):
        anchors = [4039 - 61 * i for i in range(n_seg)]
        rows_per = [16324 - 37 * i for i in range(n_seg)]
        page = 64
        pages = [(a + page - 1) // page for a in anchors]
        kc = torch.randn(sum(pages), page, HKV, D, device="cuda", dtype=torch.bfloat16)
        vc = torch.randn_like(kc)
        table = torch.zeros(n_seg, max(pages), dtype=torch.int32)
        start = 0
        for i, n in enumerate(pages):
            table[i, :n] = torch.arange(start, start + n)
            start += n
        table = table.cuda()
        q = torch.randn(sum(rows_per), HQ, D, device="cuda", dtype=torch.bfloat16)
        seg = _cu(rows_per)
        plen = torch.tensor(anchors, dtype=torch.int32, device="cuda")
        flops = sum(4 * r * a * HQ * D for r, a in zip(rows_per, anchors))
        call = lambda: prefix_attention(q, kc, vc, seg, table, plen, max(rows_per), SCALE)  # noqa: E731,B023
        o, lse = call()
        rows = [_row("ours_triton_paged", bench_ms(call), flops)]
        flat_k, flat_v = kc.flatten(0, 1), vc.flatten(0, 1)
        # each anchor's keys end mid-page: gather the exact rows
        rows_k = torch.cat([torch.arange(int(table[i, 0]) * page, int(table[i, 0]) * page + a)
                            for i, a in enumerate(anchors)]).cuda()
        cu_k = _cu(anchors)

        def lib(q=q, o=o, lse=lse, rows_k=rows_k, cu_k=cu_k, seg=seg, anchors=anchors,
                rows_per=rows_per, flops=flops, flat_k=flat_k, flat_v=flat_v):
            kk, vv = flat_k[rows_k], flat_v[rows_k]
            c = lambda: _cudnn_ragged(q, kk, vv, seg, cu_k, max(rows_per), max(anchors), False)  # noqa: E731
            res = c()
            gather_ms = bench_ms(lambda: (flat_k[rows_k], flat_v[rows_k]))
            row = _row("cudnn_ragged", bench_ms(c), flops, gather_ms=round(gather_ms, 4),
                       out_shape=list(res[0].shape), lse_shape=list(res[1].shape))
            _compare(row, res, o, lse, q.shape[0])
            return row
        _try(rows, "cudnn_ragged", lib)
        out[f"prefix_{n_seg}seg"] = rows

    # new shapes: first call vs repeat, varying totals and maxima
    shapes = []
    for i in range(6):
        lengths = torch.randint(200, 401, (200 + 7 * i,), generator=g).tolist()
        total, mx = sum(lengths), max(lengths)
        q = torch.randn(total, HQ, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(total, HKV, D, device="cuda", dtype=torch.bfloat16)
        cu = _cu(lengths)
        try:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            _cudnn_ragged(q, k, k, cu, cu, mx, mx, True)
            torch.cuda.synchronize()
            first = (time.perf_counter() - t0) * 1e3
            rep = bench_ms(lambda: _cudnn_ragged(q, k, k, cu, cu, mx, mx, True),  # noqa: B023
                           warmup=3, rep=10)
            shapes.append({"docs": len(lengths), "total": total, "max": mx,
                           "first_call_ms": round(first, 2), "repeat_ms": round(rep, 3)})
        except Exception as exc:  # noqa: BLE001
            shapes.append({"error": f"{type(exc).__name__}: {str(exc)[:300]}"})
    out["new_shapes"] = shapes
    return out


def main(argv=None) -> None:
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--only", choices=("new_shapes", "ragged"), help="run one section alone")
    args = p.parse_args(argv)
    setup_logging()
    res = Results("gpu-h200-backends.json")
    res.section("env", env_info)
    res.section("cudnn_version", lambda: torch.backends.cudnn.version())
    if args.only == "new_shapes":
        res.section("cudnn_new_shapes", cudnn_new_shapes)
        return
    if args.only == "ragged":
        res.section("ragged", ragged)
        return
    res.section("ceilings", measure_ceilings)
    res.section("gemms", gemms)
    res.section("prefix", prefix)
    res.section("causal_anchor", causal_anchor)
    g = torch.Generator().manual_seed(0)
    docs = torch.randint(200, 401, (220,), generator=g).tolist()
    res.section("varlen_filter", varlen, docs, "220 docs of 200-400")
    suffixes = torch.randint(10, 21, (1100,), generator=g).tolist()
    res.section("varlen_suffix", varlen, suffixes, "1100 suffixes of 10-20")
    res.section("cudnn_new_shapes", cudnn_new_shapes)


if __name__ == "__main__":
    main()
