"""Decode-step attention tiles: one query token per sequence over its paged KV (the decode
graphs' prefix-attention call), timed for several (BLOCK_M, BLOCK_N, warps, stages), at the
Qwen3-4B head shape, with the KV bytes read per second beside the HBM bandwidth.

    python -m bench.probes.decode_attention [--seqs 512 1024] [--keys 470 700] [--kv-fp8]

`--kv-fp8`: the arena in e4m3 with a scale per token and KV head (infer/gpu/paged_kv.py); the
bytes per second count its bytes (values and scales). Each tile's output is checked against
the float32 reference (prefix_attention_ref over the arena as stored, dequantized) on the first
`--check` sequences (`ref_rel_err`), and against the first tile's (`max_diff`).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

# (BLOCK_M, BLOCK_N, warps, stages), BLOCK_N at most the page (64). Tiles of two and four pages
# (BLOCK_N 128, 256, a block-table entry per column) were measured slower than these on both
# arenas (bench/results/decode-tiles-h100.md, session 38) and the kernel no longer takes them.
CANDIDATES = [(64, 64, 4, 3), (64, 32, 4, 3), (16, 64, 4, 3), (16, 64, 4, 4), (16, 32, 4, 4),
              (16, 64, 2, 3), (32, 64, 4, 3), (16, 64, 8, 3), (16, 64, 4, 2)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", type=int, nargs="+", default=[512, 1024])
    ap.add_argument("--keys", type=int, nargs="+", default=[470])
    ap.add_argument("--kv-fp8", action="store_true")
    ap.add_argument("--check", type=int, default=32, help="sequences checked against float32")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    import torch

    from quail_kernels.kv_fp8 import quantize_kv, scales_by_head
    from quail_kernels.prefix_attention import prefix_attention, prefix_attention_ref

    hq, hkv, d, page = 32, 8, 128, 64
    rows = []
    for n, keys in ((n, keys) for n in args.seqs for keys in args.keys):
        pages_each = -(-keys // page)
        total = n * pages_each + 1
        k = torch.randn(total, page, hkv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        perm = torch.randperm(total - 1, device="cuda")[:n * pages_each].to(torch.int32)
        table = perm.view(n, pages_each).contiguous()
        lens = torch.full((n,), keys, dtype=torch.int32, device="cuda")
        cu = torch.arange(n + 1, dtype=torch.int32, device="cuda")
        q = torch.randn(n, hq, d, device="cuda", dtype=torch.bfloat16)
        ref = None
        kv_bytes = 2 * n * keys * hkv * d * 2
        scales = {}
        if args.kv_fp8:
            (k, ks), (v, vs) = quantize_kv(k), quantize_kv(v)
            scales = {"k_scale": scales_by_head(ks), "v_scale": scales_by_head(vs)}
            kv_bytes = 2 * n * keys * hkv * (d + 4)
        c = min(args.check, n)
        exact, _ = prefix_attention_ref(q[:c].float(), k, v, cu[:c + 1], table[:c], lens[:c], 1,
                                        d ** -0.5, **scales)
        for blocks in CANDIDATES:
            try:
                out, _ = prefix_attention(q, k, v, cu, table, lens, 1, d ** -0.5, blocks=blocks,
                                          **scales)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                start.record()
                for _ in range(50):
                    prefix_attention(q, k, v, cu, table, lens, 1, d ** -0.5, blocks=blocks,
                                     **scales)
                end.record()
                torch.cuda.synchronize()
                us = start.elapsed_time(end) * 1000 / 50
            except Exception as exc:  # (a tile this Triton or GPU refuses)
                rows.append({"seqs": n, "blocks": blocks, "error": str(exc)[:200]})
                continue
            ref = out if ref is None else ref
            rows.append({"seqs": n, "keys": keys, "blocks": blocks, "us": round(us, 1),
                         "kv_tb_per_s": round(kv_bytes / us / 1e6, 2),
                         "max_diff": float((out.float() - ref.float()).abs().max()),
                         "ref_rel_err": round(float((out[:c].float() - exact).norm()
                                                    / exact.norm()), 5)})
            print(json.dumps(rows[-1]), flush=True)
    name = "decode_attention_fp8.json" if args.kv_fp8 else "decode_attention.json"
    Path(args.out, name).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
