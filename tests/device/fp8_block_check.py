"""Block-scaled fp8 on the GPU in one command: which GEMM backend runs (torch's block-scaled
_scaled_mm or the Triton kernel), the Qwen3-4B layer GEMMs and fused epilogues per scheme (bf16,
per-channel fp8, block-scaled on each backend: error and time), TRUE/FALSE decision agreement on
random Qwen3-4B weights per scheme against the float32 plain-torch path and against the GPU bf16
path, and a Qwen3-4B-shape checkpoint written in the published FP8 format, loaded through the
product's factory (precision auto) and answering like the same checkpoint run in bf16.

    PYTHONPATH=. python tests/device/fp8_block_check.py [--prompts 400] [--skip checkpoint]

Writes fp8_block_check.json under $OUT (or bench/results/local), each section as it ends.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import shutil
import tempfile
import time

import torch
import torch.nn.functional as F
from model_check import _compare, _margins, _prompts

import quail_engine.infer.gpu.linear as linear_module
from quail_engine.infer.api import EngineStats
from quail_engine.infer.gpu.linear import BLOCK_BACKENDS, GpuLinear, probe_block_backend
from quail_engine.infer.gpu.runner import GpuRunner
from quail_engine.infer.runner import SeqJob
from quail_kernels.add_rmsnorm import add_rmsnorm, add_rmsnorm_ref
from quail_kernels.block_fp8_gemm import expand_scale, quantize_groups, quantize_groups_ref
from quail_kernels.silu_mul import silu_mul, silu_mul_ref
from quail_testing.gpu import bench_ms, env_info, setup_logging
from quail_testing.results import Results

log = logging.getLogger("fp8_block_check")
H, HQ, HKV, D, INTER = 2560, 32, 8, 128, 9728
LAYER_GEMMS = {"qkv": ((HQ + 2 * HKV) * D, H), "o": (H, HQ * D), "gate_up": (2 * INTER, H),
               "down": (H, INTER)}
SCHEMES = {"bf16": dict(fp8=False), "fp8": dict(fp8=True),
           "fp8_mlp_only": dict(fp8=True, fp8_proj=("gate_up", "down")),
           "fp8_block": dict(fp8=True, fp8_block=True),
           "fp8_block_triton": dict(fp8=True, fp8_block=True, block_backend="triton")}


def _err(out, ref) -> float:
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm()) if torch.isfinite(out).all() else float("nan")


def _deq_groups(q, s):
    return q.float() * expand_scale(s, q.shape, 1, 128)


def backends() -> dict:
    """Which backends run, their error against the exact product, and whether cuBLAS takes a
    row count that is not a multiple of 4 unpadded (linear.ROW_MULTIPLE = 1)."""
    chosen = probe_block_backend("cuda")
    out = {"chosen": chosen, "has_F_scaled_mm": hasattr(F, "scaled_mm")}
    w = torch.randn(INTER, H, device="cuda", dtype=torch.bfloat16) * 0.02
    for m in (4096, 4097):
        x = torch.randn(m, H, device="cuda", dtype=torch.bfloat16)
        x8, sx = quantize_groups(x)
        ref = F.linear(x.float(), w.float())
        for backend in BLOCK_BACKENDS:
            for multiple in ((4, 1) if backend != "triton" and m % 4 else (4,)):
                key = f"{backend}_m{m}" + ("_unpadded" if multiple == 1 else "")
                linear_module.ROW_MULTIPLE = multiple
                try:
                    lin = GpuLinear(w, fp8=True, block=True, block_backend=backend)
                    out[key] = {"rel_err_vs_exact": _err(lin(x8, sx), ref)}
                except Exception as exc:  # noqa: BLE001 - recorded: what this torch runs
                    out[key] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
                finally:
                    linear_module.ROW_MULTIPLE = 4
    return out


def triton_tiles(m: int = 16384) -> list[dict]:
    """The Triton block-scaled GEMM's tile shapes on the gate_up and down GEMMs (its launcher
    default is the first)."""
    from quail_kernels.block_fp8_gemm import block_fp8_gemm

    rows = []
    for name in ("gate_up", "down"):
        n, k = LAYER_GEMMS[name]
        lin = GpuLinear(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02, fp8=True,
                        block=True, block_backend="triton")
        xg, sg = quantize_groups(torch.randn(m, k, device="cuda", dtype=torch.bfloat16))
        for bm, bn, gm, warps, stages in ((64, 128, 8, 4, 3), (128, 128, 8, 8, 3),
                                          (128, 128, 8, 4, 4), (128, 64, 8, 4, 4),
                                          (64, 64, 8, 4, 4)):
            args = (xg, sg, lin.weight, lin.scale, torch.bfloat16, bm, bn, gm, warps, stages)
            try:
                ms = bench_ms(lambda args=args: block_fp8_gemm(*args))
                rows.append({"gemm": name, "tile": [bm, bn, gm, warps, stages],
                             "ms": round(ms, 4), "tflops": round(2 * m * n * k / ms / 1e9, 1)})
            except Exception as exc:  # noqa: BLE001
                rows.append({"gemm": name, "tile": [bm, bn, gm, warps, stages],
                             "error": str(exc)[:200]})
    return rows


def gemms(m: int = 16384) -> list[dict]:
    """Each Qwen3-4B layer GEMM at m tokens, bf16 vs per-channel fp8 vs block-scaled fp8 on each
    backend that runs; the per-layer sum last."""
    rows, total = [], {}
    for name, (n, k) in LAYER_GEMMS.items():
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ref = F.linear(x.float(), w.float())
        flops = 2 * m * n * k
        row = {"gemm": name, "m": m, "n": n, "k": k}
        runs = {"bf16": (lambda w=w, x=x: F.linear(x, w), None)}
        ch = GpuLinear(w, fp8=True)
        xr, sr = add_rmsnorm(x, None, torch.ones(k, device="cuda"), 1e-6, True)[0::2]
        # per-row scaled input after a unit norm: compare against the normed reference
        ref_normed = F.linear(add_rmsnorm_ref(x, None, torch.ones(k, device="cuda"), 1e-6)[0]
                              .float(), w.float())
        runs["fp8_channel"] = (lambda ch=ch, xr=xr, sr=sr: ch(xr, sr), ref_normed)
        xg, sg = quantize_groups(x)
        for backend in BLOCK_BACKENDS:
            try:
                lin = GpuLinear(w, fp8=True, block=True, block_backend=backend)
                lin(xg, sg)
            except Exception as exc:  # noqa: BLE001
                row[f"block_{backend}"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                continue
            runs[f"block_{backend}"] = (lambda lin=lin, xg=xg, sg=sg: lin(xg, sg), ref)
        for label, (fn, want) in runs.items():
            ms = bench_ms(fn)
            row[f"{label}_ms"] = round(ms, 4)
            row[f"{label}_tflops"] = round(flops / ms / 1e9, 1)
            row[f"{label}_rel_err"] = _err(fn(), want if want is not None else ref)
            total[label] = total.get(label, 0.0) + ms
        rows.append(row)
    rows.append({"gemm": "layer total", "m": m, **{f"{k}_ms": round(v, 3)
                                                    for k, v in total.items()}})
    return rows


def epilogues(m: int = 16384) -> list[dict]:
    """The fused norm / SiLU*mul epilogues with per-row vs per-group scales, and the O input's
    group quantizer: error of the dequantized output against the torch reference, time."""
    x = torch.randn(m, H, device="cuda", dtype=torch.bfloat16)
    r = torch.randn(m, H, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(H, device="cuda")
    gu = torch.randn(m, 2 * INTER, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m, HQ * D, device="cuda", dtype=torch.bfloat16)
    rows = []
    for group in (None, 128):
        deq = _deq_groups if group else (lambda q, s: q.float() * s)
        out, _, s = add_rmsnorm(x, r, w, 1e-6, True, group_size=group)
        ref = add_rmsnorm_ref(x, r, w, 1e-6)[0].float()
        rows.append({"kernel": f"add_rmsnorm_fp8{'_g128' if group else ''}",
                     "rel_err": _err(deq(out, s), ref),
                     "ms": round(bench_ms(lambda g=group: add_rmsnorm(x, r, w, 1e-6, True,
                                                                      group_size=g)), 4)})
        out, s = silu_mul(gu, True, group_size=group)
        rows.append({"kernel": f"silu_mul_fp8{'_g128' if group else ''}",
                     "rel_err": _err(deq(out, s), silu_mul_ref(gu)[0].float()),
                     "ms": round(bench_ms(lambda g=group: silu_mul(gu, True, group_size=g)), 4)})
    q, s = quantize_groups(a)
    rq, rs = quantize_groups_ref(a)
    rows.append({"kernel": "quantize_groups (O input)", "rel_err": _err(_deq_groups(q, s),
                                                                        a.float()),
                 "bytes_equal_ref": bool(torch.equal(q.view(torch.uint8), rq.view(torch.uint8))),
                 "ms": round(bench_ms(lambda: quantize_groups(a)), 4)})
    return rows


def decisions(shape: str = "qwen3-4b", num_prompts: int = 400, seed: int = 0) -> dict:
    """Agreement of each scheme's TRUE/FALSE decisions with the float32 plain-torch path and
    with the GPU bf16 path, random weights of `shape`."""
    from quail_engine.infer.gpu.engine import build_gpu_model
    from quail_engine.infer.models import build_model
    from quail_engine.infer.runner import Runner
    from quail_engine.infer.scheduler import Scheduler
    from quail_testing.random_weights import random_state_dict, shape_config

    config = shape_config(shape)
    vocab = (1000, 2000, 3000, 4000)
    prompts = _prompts(num_prompts, config.vocab_size, 16, 320, seed)
    sd = random_state_dict(config, seed=seed, device="cuda")
    with torch.device("cuda"):
        ref_model = build_model(config)
    ref_model.load_state_dict(sd, strict=False)
    torch.backends.cuda.matmul.allow_tf32 = False
    ref_jobs = [SeqJob(p, vocab=vocab) for p in prompts]
    with torch.inference_mode():
        Runner(ref_model.eval(), Scheduler(8192, 64), EngineStats(), "cuda").run(ref_jobs)
    del ref_model
    ref_m, ref_l = _margins(ref_jobs), torch.cat([j.logits for j in ref_jobs])
    out: dict = {"shape": shape, "prompts": num_prompts}
    got = {}
    for name, opts in SCHEMES.items():
        model = build_gpu_model(config, sd, kv_fraction=0.03, **opts)
        jobs = [SeqJob(p, vocab=vocab) for p in prompts]
        GpuRunner(model, EngineStats(), token_budget=16384).run(jobs)
        m, logits = _margins(jobs), torch.cat([j.logits for j in jobs])
        got[name] = (m, logits)
        out[name] = {"vs_float32": _compare(ref_m, m, ref_l, logits)}
        if name != "bf16":
            out[name]["vs_gpu_bf16"] = _compare(*got["bf16"][:1], m, got["bf16"][1], logits)
        if opts.get("fp8_block"):
            out[name]["backend"] = model.layers[0].qkv.backend
        del model
        gc.collect()
        torch.cuda.empty_cache()
    return out


def checkpoint(shape: str = "qwen3-4b", num_prompts: int = 200) -> dict:
    """A published-format FP8 checkpoint of `shape` (random weights): loaded by the factory with
    precision auto (-> fp8-block, its fp8 blocks used as they are) and with bf16 (dequantized);
    load times and decision agreement between the two."""
    from quail_engine.infer.factory import load_engine
    from quail_testing.fp8_checkpoint import write_fp8_checkpoint
    from quail_testing.random_weights import shape_config

    config = shape_config(shape)
    directory = tempfile.mkdtemp(prefix="fp8_ckpt_")
    try:
        t0 = time.perf_counter()
        write_fp8_checkpoint(directory, config, device="cuda")
        out: dict = {"shape": shape, "write_s": round(time.perf_counter() - t0, 1)}
        prompts = _prompts(num_prompts, config.vocab_size, 16, 320, 1)
        margins = {}
        for precision in ("auto", "bf16"):
            t0 = time.perf_counter()
            engine = load_engine(directory, "cuda", precision=precision)
            load_s = time.perf_counter() - t0
            jobs = [SeqJob(p, vocab=(1000, 2000)) for p in prompts]
            engine.runner.run(jobs)
            margins[precision] = _margins(jobs)
            out[precision] = {"model_id": engine.model_id, "load_s": round(load_s, 2),
                              "gpu_mem_GiB": round(torch.cuda.memory_allocated() / 2**30, 2)}
            del engine
            gc.collect()
            torch.cuda.empty_cache()
        agree = (margins["auto"] > 0) == (margins["bf16"] > 0)
        out["auto_vs_bf16_decision_agreement"] = float(agree.float().mean())
        return out
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--prompts", type=int, default=400)
    p.add_argument("--shape", default="qwen3-4b")
    p.add_argument("--skip", default="")
    args = p.parse_args(argv)
    setup_logging()
    skip = set(args.skip.split(","))
    res = Results("fp8_block_check.json")
    res.section("env", env_info)
    for name, fn, fargs in (("backends", backends, ()), ("gemms", gemms, ()),
                            ("gemms_odd_m", gemms, (16383,)), ("triton_tiles", triton_tiles, ()),
                            ("epilogues", epilogues, ()),
                            ("decisions", decisions, (args.shape, args.prompts)),
                            ("checkpoint", checkpoint, (args.shape,))):
        if name not in skip:
            res.section(name, fn, *fargs)
    print(json.dumps(res.data, indent=1, default=str)[-6000:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
