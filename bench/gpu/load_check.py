"""The GPU loader (infer/gpu/load.py) against the CPU load path on the same model directory:
seconds of each, per precision, and whether the weights and the logits they give are equal.

The old path is what GpuEngine.load did before: infer/loader.load_model on the CPU in bf16,
then GpuCausalLM from its state dict."""

from __future__ import annotations

import gc
import logging
import time
from pathlib import Path

import torch

from quail_engine.infer.factory import PRECISIONS
from quail_engine.infer.gpu.engine import build_gpu_model
from quail_engine.infer.gpu.load import load_checkpoint

log = logging.getLogger("bench.gpu.load_check")


def _synced(fn, *args, **kwargs):
    """(fn(*args, **kwargs), seconds with the GPU synchronized around it)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    torch.cuda.synchronize()
    return out, round(time.perf_counter() - t0, 3)


def _tensors(model) -> dict[str, torch.Tensor]:
    out = {"embed": model.embed, "final_norm": model.final_norm}
    for i, layer in enumerate(model.layers):
        for name in ("ln1", "ln2", "q_norm", "k_norm"):
            if getattr(layer, name) is not None:
                out[f"{i}.{name}"] = getattr(layer, name)
        for name in ("qkv", "o", "gate_up", "down"):
            lin = getattr(layer, name)
            out[f"{i}.{name}"] = lin.weight
            if lin.scale is not None:
                out[f"{i}.{name}.scale"] = lin.scale
    return out


def _logits(model, num_seqs: int = 8, length: int = 300, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (num_seqs * length,), generator=g)
    pos = torch.arange(length).repeat(num_seqs)
    cu = torch.arange(0, (num_seqs + 1) * length, length, dtype=torch.int32)
    read = cu[1:].long() - 1
    dev = model.device
    with torch.inference_mode():
        hidden, _ = model.forward(ids.to(dev), pos.to(dev), cu.to(dev), [None] * num_seqs,
                                  read.to(dev))
        return model.logits(hidden).cpu()


def _compare(new, old) -> dict:
    a, b = _tensors(new), _tensors(old)
    differ = [k for k in a if a[k].dtype != b[k].dtype or not torch.equal(
        a[k].view(torch.uint8) if a[k].dtype == torch.float8_e4m3fn else a[k],
        b[k].view(torch.uint8) if b[k].dtype == torch.float8_e4m3fn else b[k])]
    la, lb = _logits(new), _logits(old)
    return {"tensors": len(a), "tensors_differing": differ[:10],
            "logits_equal": bool(torch.equal(la, lb)),
            "logits_max_abs_diff": float((la - lb).abs().max()),
            "argmax_equal": bool(torch.equal(la.argmax(-1), lb.argmax(-1)))}


def copy_sweep(model_dir: Path, options: list[tuple[int, int]]) -> list[dict]:
    """GB/s of the file -> GPU copy alone for (threads, chunk MiB) settings."""
    rows = []
    for threads, mib in options:
        (state, _, _), secs = _synced(load_checkpoint, str(model_dir), "cuda", "bf16",
                                      threads=threads, chunk_bytes=mib << 20)
        nbytes = sum(t.numel() * t.element_size() for t in state.values())
        rows.append({"threads": threads, "chunk_MiB": mib, "seconds": secs,
                     "GBps": round(nbytes / secs / 1e9, 2)})
        log.info("copy sweep %s", rows[-1])
        del state
        gc.collect()
        torch.cuda.empty_cache()
    return rows


def check_load(model_dir: Path, precisions: list[str], old_path: bool = True) -> dict:
    from quail_engine.infer.gpu.engine import GpuEngine
    from quail_engine.infer.loader import load_model

    t0 = time.perf_counter()
    torch.empty(1, device="cuda")  # the CUDA context, which a user's load also pays
    torch.cuda.synchronize()
    out: dict = {"cuda_init_s": round(time.perf_counter() - t0, 3), "precisions": {}}
    cpu_state = None
    if old_path:
        (cpu_model, _, config), out["old_cpu_load_s"] = _synced(
            load_model, str(model_dir), "cpu", torch.bfloat16)
        cpu_state = cpu_model.state_dict()
    for precision in precisions:
        opts = PRECISIONS[precision]
        engine, new_s = _synced(GpuEngine.load, str(model_dir), "cuda", **opts)
        row = {"new_load_s": new_s}
        if cpu_state is not None:
            old, build_s = _synced(build_gpu_model, config, cpu_state, device="cuda", **opts)
            row.update(old_gpu_build_s=build_s, old_load_s=round(out["old_cpu_load_s"] +
                                                                 build_s, 3))
            row.update(_compare(engine.model, old))
            del old
        out["precisions"][precision] = row
        log.info("load check %s: %s", precision, row)
        del engine
        gc.collect()
        torch.cuda.empty_cache()
    return out
