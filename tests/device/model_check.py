"""Model-level correctness on the GPU: random weights of a real shape, the plain-torch CausalLM
in float32 (the CPU path's code, run on the GPU) vs GpuCausalLM in bf16 and fp8 on the same
weights. Reports answer-logit errors and TRUE/FALSE decision agreement over random prompts, and
prefix-shared vs unshared answers on the GPU path."""

from __future__ import annotations

import gc

import torch

from quail_engine.infer.api import EngineStats
from quail_engine.infer.gpu.engine import build_gpu_model
from quail_engine.infer.gpu.runner import GpuRunner
from quail_engine.infer.models import build_model
from quail_engine.infer.runner import Runner, SeqJob
from quail_engine.infer.scheduler import Scheduler
from quail_testing.random_weights import random_state_dict, shape_config

VARIANTS = {
    "bf16": dict(fp8=False),
    "bf16_bf16residual": dict(fp8=False, fp32_residual=False),
    "fp8": dict(fp8=True),  # bf16 residual stream, fast accumulation (the defaults)
    "fp8_fp32residual": dict(fp8=True, fp32_residual=True),
    "fp8_mlp_only": dict(fp8=True, fp8_proj=("gate_up", "down")),
}


def _prompts(n: int, vocab: int, lo: int, hi: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi, (n,), generator=g).tolist()
    return [torch.randint(0, vocab, (L,), generator=g).tolist() for L in lengths]


def _margins(jobs: list[SeqJob]) -> torch.Tensor:
    return torch.stack([j.logits[0, 0] - j.logits[0, 1] for j in jobs]).float()


def _compare(ref: torch.Tensor, got: torch.Tensor, ref_logits, got_logits) -> dict:
    agree = (ref > 0) == (got > 0)
    return {"decision_agreement": float(agree.float().mean()),
            "num_prompts": int(ref.numel()), "flips": int((~agree).sum()),
            "margin_max_abs_err": float((ref - got).abs().max()),
            "margin_mean_abs_err": float((ref - got).abs().mean()),
            "margin_std_ref": float(ref.std()),
            "logit_rel_err": float((got_logits - ref_logits).norm() / ref_logits.norm())}


def check_shape(name: str, num_prompts: int = 400, seed: int = 0,
                anchor_len: tuple[int, int] = (1500, 2500)) -> dict:
    config = shape_config(name)
    vocab = (1000, 2000, 3000, 4000)  # [TRUE-ish, FALSE-ish, two more columns]
    prompts = _prompts(num_prompts, config.vocab_size, 16, 320, seed)
    sd = random_state_dict(config, seed=seed, device="cuda")
    fast = {name: build_gpu_model(config, sd, kv_fraction=0.03, **opts)
            for name, opts in VARIANTS.items()}
    with torch.device("cuda"):
        ref_model = build_model(config)
    ref_model.load_state_dict(sd, strict=False)
    ref_model.eval()
    with torch.device("cuda"):
        plain_bf16 = build_model(config)
    plain_bf16.load_state_dict(sd, strict=False)
    plain_bf16 = plain_bf16.to(torch.bfloat16).eval()
    del sd
    gc.collect()
    torch.backends.cuda.matmul.allow_tf32 = False
    ref_jobs = [SeqJob(p, vocab=vocab) for p in prompts]
    with torch.inference_mode():
        Runner(ref_model, Scheduler(8192, 64), EngineStats(), "cuda").run(ref_jobs)
    ref_m = _margins(ref_jobs)
    ref_l = torch.cat([j.logits for j in ref_jobs])
    out = {"shape": name, "reference": "plain-torch CausalLM float32 on the GPU"}
    plain_jobs = [SeqJob(p, vocab=vocab) for p in prompts]
    with torch.inference_mode():
        Runner(plain_bf16, Scheduler(8192, 64), EngineStats(), "cuda").run(plain_jobs)
    out["plain_torch_bf16"] = _compare(ref_m, _margins(plain_jobs), ref_l,
                                       torch.cat([j.logits for j in plain_jobs]))
    for variant, model in fast.items():
        jobs = [SeqJob(p, vocab=vocab) for p in prompts]
        GpuRunner(model, EngineStats(), token_budget=16384).run(jobs)
        out[variant] = _compare(ref_m, _margins(jobs), ref_l, torch.cat([j.logits for j in jobs]))
        if variant in ("bf16", "fp8"):
            out[variant]["prefix_vs_unshared"] = prefix_check(model, config.vocab_size, vocab, seed,
                                                              anchor_len)
    del ref_model, plain_bf16, fast
    gc.collect()
    torch.cuda.empty_cache()
    return out


def prefix_check(model, vocab_size: int, vocab, seed: int,
                 anchor_len: tuple[int, int] = (1500, 2500), num_anchors: int = 2,
                 num_suffixes: int = 400) -> dict:
    """`num_anchors` anchors kept in the paged arena, `num_suffixes` partner suffixes of 8-24
    tokens interleaved across them (200 per anchor: ~3,200 rows, so the library kernel takes
    the bulk of each segment when the model has one); the same prompts run unshared, and the
    shared ones again with the prefix attention all on Triton."""
    anchors = _prompts(num_anchors, vocab_size, anchor_len[0], anchor_len[1], seed + 1)
    suffixes = _prompts(num_suffixes, vocab_size, 8, 24, seed + 2)
    runner = GpuRunner(model, EngineStats(), token_budget=16384)
    stores = [SeqJob(a, read=(), store_kv=True) for a in anchors]
    runner.run(stores)
    owner = [i % num_anchors for i in range(len(suffixes))]
    shared = [SeqJob(s, prefix=stores[o].kv, vocab=vocab) for s, o in zip(suffixes, owner)]
    runner.run(shared)
    lib, model.lib_attention = model.lib_attention, None
    triton_only = [SeqJob(s, prefix=stores[o].kv, vocab=vocab) for s, o in zip(suffixes, owner)]
    runner.run(triton_only)
    model.lib_attention = lib
    full = [SeqJob(anchors[o] + s, vocab=vocab) for s, o in zip(suffixes, owner)]
    runner.run(full)
    for s in stores:
        s.kv.release()
    res = _compare(_margins(full), _margins(shared), torch.cat([j.logits for j in full]),
                   torch.cat([j.logits for j in shared]))
    res["library_prefix"] = lib is not None
    res["library_vs_triton_prefix"] = _compare(
        _margins(triton_only), _margins(shared), torch.cat([j.logits for j in triton_only]),
        torch.cat([j.logits for j in shared]))
    res["free_pages_restored"] = model.arena.num_free_pages == model.arena.num_pages
    return res
