"""cuDNN's fp8 fused attention for the library routes of gpu/attention.py (the bulk of long
prefix segments and long sequences' own causal part), through the nvidia-cudnn-frontend graph
API (torch exposes only cuDNN's bf16/fp16 op). Opt-in (`--precision fp8-attn`): the
probabilities and the inputs in e4m3 cost accuracy (5.9% output error against bf16 at the
join's shape on random inputs: bench/results/archive/gpu-h200-fp8-attention-2026-11-29.json).

Same contract as `attention.cudnn_attend`: bf16 q [n, Hq, D], k/v [L, Hkv, D] (GQA) -> (o [n,
Hq, D] bf16, lse [n, Hq] natural-log). Inside: q, k and v scaled per tensor to e4m3 by their
amax (computed on the GPU: no host sync), the probabilities by `SCALE_P`, and the output
written in bf16 where cuDNN offers it, else in e4m3 scaled by the amax of v (each output row is
a convex mix of v's rows) and widened. cuDNN builds a graph per shape (tens of ms), so graphs
are cached by (queries, keys, causal); gpu/attention.py already feeds few shapes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

E4M3 = torch.float8_e4m3fn
# e4m3's largest finite value is 448; the scaled inputs aim a little below it, so that the bf16
# product of a value and its scale never rounds above it
SCALE_TO = 440.0
SCALE_P = 448.0  # softmax probabilities lie in [0, 1]


class Fp8AttentionUnavailable(ValueError):
    """The frontend is not installed or cuDNN cannot run fp8 attention here."""


def _frontend():
    try:
        import cudnn  # nvidia-cudnn-frontend
    except ImportError as exc:
        raise Fp8AttentionUnavailable(
            "fp8 attention needs the nvidia-cudnn-frontend package (pip install "
            f"nvidia-cudnn-frontend): {exc}") from exc
    return cudnn


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
    """cuDNN fp8 attention for one model's heads on one device (callable like cudnn_attend)."""

    def __init__(self, device: torch.device, num_heads: int, num_kv_heads: int, head_dim: int,
                 out_bf16: bool | None = None):
        self.cudnn = _frontend()
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
