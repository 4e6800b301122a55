"""Probe: cuDNN's fp8 fused attention (through nvidia-cudnn-frontend's graph API; torch exposes
only cuDNN's bf16/fp16 op) in the places the engine's library routes (gpu/attention.py) use
cuDNN's bf16 attention: windows of 4,096 partner queries over an anchor's 4k-24k keys, and long
sequences' own causal attention at 4k-24k tokens (Qwen3-4B heads: 32 q / 8 kv, d = 128).

- `kernels`: per shape, ms and TFLOP/s of torch's bf16 cuDNN op and of `Fp8Attention` (its
  quantization of q, k and v and the widening of its e4m3 output included), output error and
  log-sum-exp difference against bf16.
- `engine`: the same random Qwen3-4B-shape weights in an fp8 GpuEngine (fp8 GEMMs) with its
  library attention swapped between bf16 cuDNN and `Fp8Attention`: long prompts (2-8k tokens,
  own causal attention on the library route) and join-shaped prompts (anchors of ~3,000 tokens
  each followed by 64 short partners: with prefix sharing the partners run as long segments
  over the anchor's pages). TRUE/FALSE decision agreement and margin error between the two,
  the noise floor (bf16 attention against itself, the prompts packed in another order), and
  the seconds of each run after a run that builds the shapes' plans.

Not wired into the engine: the result (`3630f028bb:bench/results/gpu-h200-fp8-attention-2026-12-03.md`) is
slower than bf16 below ~12k keys and flips ~15% of random-weight decisions.

The frontend is not a dependency of the project: carry its wheel (.carry/cudnn/whl, see
bench/gpu/device_session.sh) and
    PYTHONPATH=/tmp/site:. python -m bench.probes.fp8_attention   # writes $OUT/fp8_attention.json
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

import torch

from quail_testing.gpu import bench_ms, setup_logging
from quail_testing.results import Results

log = logging.getLogger(__name__)

HQ, HKV, D = 32, 8, 128
SCALE = D ** -0.5
# (queries, keys, causal)
SHAPES = [(4096, 4096, False), (4096, 12288, False), (4096, 24576, False),
          (4096, 4096, True), (8192, 8192, True), (16384, 16384, True), (24576, 24576, True)]
E4M3 = torch.float8_e4m3fn
# e4m3's largest finite value is 448; the scaled inputs aim a little below it, so that the bf16
# product of a value and its scale never rounds above it
SCALE_TO = 440.0
SCALE_P = 448.0  # softmax probabilities lie in [0, 1]


def _bhsd(t: torch.Tensor) -> tuple[list[int], list[int]]:
    """[S, H, D] contiguous -> cuDNN's (1, H, S, D) dims and strides over the same memory."""
    s, h, d = t.shape
    return [1, h, s, d], [s * h * d, d, h * d, 1]


def _quantize(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """t in e4m3 scaled by SCALE_TO / amax, and the descale amax / SCALE_TO ([1, 1, 1, 1] fp32),
    both computed on the GPU."""
    amax = t.abs().amax().float().clamp_min(1e-12)
    t8 = (t * (SCALE_TO / amax).to(t.dtype)).to(E4M3)
    return t8, (amax / SCALE_TO).reshape(1, 1, 1, 1)


@dataclass
class _Graph:
    graph: Any
    tensors: dict[str, Any]   # name -> the graph's tensor
    workspace: int


class Fp8Attention:
    """cuDNN fp8 attention for one model's heads on one device, callable like the engine's
    `attention.cudnn_attend` (bf16 q [n, Hq, D], k/v [L, Hkv, D] -> o [n, Hq, D] bf16, lse [n,
    Hq]): q, k and v scaled per tensor to e4m3 by their amax (on the GPU, no host sync), the
    probabilities by SCALE_P, the output in bf16 where cuDNN builds it (Blackwell only, cuDNN
    9.13+), else in e4m3 scaled by v's amax (an output row is a convex mix of v's rows) and
    widened. Graphs cached by (queries, keys, causal)."""

    def __init__(self, device: torch.device, num_heads: int, num_kv_heads: int, head_dim: int,
                 out_bf16: bool | None = None):
        import cudnn  # nvidia-cudnn-frontend (carried: .carry/cudnn/whl)
        self.cudnn = cudnn
        self.device = device
        self.heads = (num_heads, num_kv_heads, head_dim)
        self.handle = self.cudnn.create_handle()
        self.graphs: dict[tuple[int, int, bool], _Graph] = {}
        self.workspace = torch.empty(0, device=device, dtype=torch.uint8)
        one = lambda x: torch.full((1, 1, 1, 1), x, device=device, dtype=torch.float32)  # noqa: E731
        self.const = {"descale_s": one(1.0 / SCALE_P), "scale_s": one(SCALE_P)}
        self.unit = one(1.0)
        self.scratch = {"amax_s": one(0.0), "amax_o": one(0.0)}
        # bf16 output where this cuDNN builds it (no e4m3 rounding of the output), else e4m3
        self.out_bf16 = out_bf16
        if out_bf16 is None:
            try:
                self._graph(128, 256, False, out_bf16=True)
                self.out_bf16 = True
            except Exception as exc:  # noqa: BLE001  (cudnn raises its own error types)
                log.info("cuDNN fp8 attention writes e4m3 output (bf16 output: %s)",
                         str(exc).splitlines()[0][:160])
                self.graphs.clear()
                self.out_bf16 = False

    def _graph(self, nq: int, nk: int, causal: bool, out_bf16: bool | None = None) -> _Graph:
        key = (nq, nk, causal)
        got = self.graphs.get(key)
        if got is not None:
            return got
        cudnn = self.cudnn
        out_bf16 = self.out_bf16 if out_bf16 is None else out_bf16
        hq, hkv, d = self.heads
        graph = cudnn.pygraph(io_data_type=cudnn.data_type.FP8_E4M3,
                              intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=self.handle)
        t = {}
        for name, rows, heads in (("q", nq, hq), ("k", nk, hkv), ("v", nk, hkv)):
            dims, strides = _bhsd(torch.empty(rows, heads, d, device="meta"))
            t[name] = graph.tensor(name=name, dim=dims, stride=strides,
                                   data_type=cudnn.data_type.FP8_E4M3)
        for name in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o"):
            t[name] = graph.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1],
                                   data_type=cudnn.data_type.FLOAT)
        o, stats, amax_s, amax_o = graph.sdpa_fp8(
            q=t["q"], k=t["k"], v=t["v"], descale_q=t["descale_q"], descale_k=t["descale_k"],
            descale_v=t["descale_v"], descale_s=t["descale_s"], scale_s=t["scale_s"],
            scale_o=t["scale_o"], generate_stats=True, attn_scale=d ** -0.5,
            use_causal_mask=causal, name="sdpa_fp8")
        dims, strides = _bhsd(torch.empty(nq, hq, d, device="meta"))
        o.set_output(True).set_dim(dims).set_stride(strides).set_data_type(
            cudnn.data_type.BFLOAT16 if out_bf16 else cudnn.data_type.FP8_E4M3)
        stats.set_output(True).set_dim([1, hq, nq, 1]).set_stride([hq * nq, nq, 1, 1]) \
            .set_data_type(cudnn.data_type.FLOAT)
        for s in (amax_s, amax_o):
            s.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(
                cudnn.data_type.FLOAT)
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
        t.update(o=o, stats=stats, amax_s=amax_s, amax_o=amax_o)
        got = _Graph(graph, t, graph.get_workspace_size())
        self.graphs[key] = got
        log.debug("cuDNN fp8 attention graph %s built", key)
        return got

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                 causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        hq, hkv, d = self.heads
        if abs(scale - d ** -0.5) > 1e-6 * scale:
            raise ValueError(f"fp8 attention is built for the scale 1/sqrt({d}); got {scale}")
        n, keys = q.shape[0], k.shape[0]
        g = self._graph(n, keys, causal)
        if g.workspace > self.workspace.numel():
            self.workspace = torch.empty(g.workspace, device=self.device, dtype=torch.uint8)
        (q8, dq), (k8, dk), (v8, dv) = (_quantize(x.contiguous()) for x in (q, k, v))
        o = torch.empty(n, hq, d, device=self.device,
                        dtype=torch.bfloat16 if self.out_bf16 else E4M3)
        stats = torch.empty(1, hq, n, 1, device=self.device, dtype=torch.float32)
        # an output row is a convex mix of v's rows: |o| <= amax(v) = dv * SCALE_TO
        scale_o = self.unit if self.out_bf16 else (1.0 / dv)
        t = g.tensors
        pack = {t["q"]: q8, t["k"]: k8, t["v"]: v8, t["descale_q"]: dq, t["descale_k"]: dk,
                t["descale_v"]: dv, t["descale_s"]: self.const["descale_s"],
                t["scale_s"]: self.const["scale_s"], t["scale_o"]: scale_o, t["o"]: o,
                t["stats"]: stats, t["amax_s"]: self.scratch["amax_s"],
                t["amax_o"]: self.scratch["amax_o"]}
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream(self.device).cuda_stream)
        g.graph.execute(pack, self.workspace, handle=self.handle)
        if not self.out_bf16:
            o = (o.to(torch.bfloat16) * dv.reshape(()).to(torch.bfloat16)).to(q.dtype)
        return o, stats.reshape(hq, n).t()

    def causal(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float):
        return self(q, k, v, scale, causal=True)


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


def kernels(fp8: Fp8Attention) -> list[dict]:
    from quail_engine.infer.gpu.attention import cudnn_attend
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for nq, nk, causal in SHAPES:
        q = torch.randn(nq, HQ, D, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(nk, HKV, D, device="cuda", dtype=torch.bfloat16, generator=g)
                for _ in range(2))
        rows.append({"queries": nq, "keys": nk, "causal": causal,
                     **measure(fp8, cudnn_attend, q, k, v, causal)})
        print(rows[-1], flush=True)
    return rows


def _prompts(vocab: int, long: int, anchors: int, partners: int, seed: int = 0):
    rng = random.Random(seed)
    tok = lambda n: [rng.randrange(3, vocab) for _ in range(n)]  # noqa: E731
    out = [tuple(tok(rng.randint(2048, 8192))) for _ in range(long)]
    for _ in range(anchors):
        anchor = tok(rng.randint(2500, 3500))
        out += [tuple(anchor + tok(rng.randint(40, 90))) for _ in range(partners)]
    return out


def _vs(ref: torch.Tensor, got: torch.Tensor) -> dict:
    agree = (ref > 0) == (got > 0)
    return {"decision_agreement": round(float(agree.float().mean()), 4),
            "flips": int((~agree).sum()),
            "margin_max_abs_err": round(float((ref - got).abs().max()), 4),
            "margin_mean_abs_err": round(float((ref - got).abs().mean()), 4)}


def engine(fp8: Fp8Attention, long: int, anchors: int, partners: int) -> dict:
    from quail_engine.infer.api import BooleanReadout, Request
    from quail_engine.infer.gpu.attention import LibAttention
    from quail_engine.infer.gpu.engine import GpuEngine, build_gpu_model
    from quail_testing.random_weights import random_state_dict, shape_config

    class Ids:  # prompts are token ids; only the readout words are encoded: 'y' 1, 'n' 2
        eos_token_id, bos_token_id = 0, None

        def encode(self, text, add_special_tokens=False):
            return [1 + (ord(c) % 2) for c in text]

        def decode(self, ids, skip_special_tokens=True):
            return ""

    readout = BooleanReadout(true_words=("y",), false_words=("n",))
    config = shape_config("qwen3-4b")
    model = build_gpu_model(config, random_state_dict(config, seed=0, device="cuda"), fp8=True,
                            device="cuda", kv_fraction=0.3)
    libs = {"bf16": model.lib_attention, "fp8": LibAttention(fp8, causal=fp8.causal)}
    gpu = GpuEngine(model, Ids(), config, prefix_sharing=True)
    items = _prompts(config.vocab_size, long, anchors, partners)

    def run(lib: str, order=1):
        model.lib_attention = libs[lib]
        t0 = time.perf_counter()
        answers = gpu.run([Request(p, readout) for p in items[::order]])
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        gpu.prefix_cache.index.clear()
        return torch.tensor([a.margin for a in answers][::order]), round(seconds, 3)

    out: dict[str, Any] = {"prompts": len(items), "tokens": sum(map(len, items))}
    with torch.inference_mode():
        margins = {}
        for lib in ("bf16", "fp8", "bf16", "fp8"):  # the first run of each builds its plans
            margins[lib], seconds = run(lib)
            out.setdefault(f"{lib}_seconds", []).append(seconds)
        again, _ = run("bf16", order=-1)
    kinds = {"long": slice(0, long), "join": slice(long, len(items)), "all": slice(None)}
    for name, part in kinds.items():
        out[name] = {"fp8_vs_bf16_attention": _vs(margins["bf16"][part], margins["fp8"][part]),
                     "noise_floor_repacked": _vs(margins["bf16"][part], again[part]),
                     "margin_std": round(float(margins["bf16"][part].std()), 4)}
    print(json.dumps(out, indent=1), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--long", type=int, default=48)
    ap.add_argument("--anchors", type=int, default=12)
    ap.add_argument("--partners", type=int, default=64)
    args = ap.parse_args(argv)
    setup_logging()
    res = Results("fp8_attention.json")
    fp8 = res.section("setup", Fp8Attention, torch.device("cuda"), HQ, HKV, D)
    if isinstance(fp8, dict):  # the section's error
        return 1
    import cudnn
    res.data.update(out_bf16=fp8.out_bf16, frontend=cudnn.__version__,
                    backend=cudnn.backend_version())
    res.data["setup"] = "ok"
    res.section("kernels", kernels, fp8)
    res.section("engine", engine, fp8, args.long, args.anchors, args.partners)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
