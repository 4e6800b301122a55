"""GpuCausalLM: the CausalLM contract (models/base.py) on Triton kernels and cuBLAS/fp8 GEMMs.

Per layer: add+RMSNorm(+fp8) -> fused QKV GEMM -> QK-norm+RoPE in place -> (store K/V into
arena pages) -> attention (attention.py: varlen causal [+ resident prefix on cuDNN/Triton],
LSE merge, +fp8) -> O GEMM -> add+RMSNorm(+fp8) -> fused gate/up GEMM -> SiLU*mul(+fp8) ->
down GEMM. The last layer runs its O projection and MLP only on the rows that are read.
Families: llama, qwen3 (qwen2 without attention bias), gemma3 (sandwich norms around both
branches, (1 + w) norm weights, scaled embeddings, tanh-GELU, sliding-window layers with their
own RoPE base, final logit softcapping; its prefix attention stays on Triton).

fp8 comes in two schemes (gpu/linear.py): per output channel x per token, or block-scaled
(`fp8_block`: 128 x 128 weight blocks, 1 x 128 activation groups, as published FP8 checkpoints;
their fp8 weights and `weight_scale_inv` are used as they are).

The residual stream is float32 in bf16 mode (its decisions agree more often with the float32
reference's than a bf16 stream's do) and bf16 in fp8 mode, where e4m3 rounding of the GEMM
inputs dominates the error and the float32 stream only costs bandwidth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from quail_engine.infer.config import ModelConfig
from quail_engine.infer.gpu.attention import layer_attention, probe_cudnn
from quail_engine.infer.gpu.batch import pack, pack_decode
from quail_engine.infer.gpu.linear import GpuLinear, fused_weight
from quail_engine.infer.gpu.paged_kv import PagedKVArena, PagedPrefix
from quail_kernels.add_rmsnorm import add_rmsnorm
from quail_kernels.block_fp8_gemm import GROUP, quantize_groups
from quail_kernels.qk_norm_rope import qk_norm_rope, rope_cos_sin
from quail_kernels.silu_mul import silu_mul

GPU_FAMILIES = ("llama", "qwen2", "qwen3", "gemma3")
FP8_PROJ = ("qkv", "o", "gate_up", "down")


def _rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[index] for any dtype (fp8 rows are gathered as bytes)."""
    if x.dtype == torch.float8_e4m3fn:
        return x.view(torch.uint8)[index].view(torch.float8_e4m3fn)
    return x[index]


class GpuLayer:
    def __init__(self, sd: Mapping[str, torch.Tensor], i: int, config: ModelConfig,
                 fp8: tuple[str, ...], device: torch.device, dtype: torch.dtype,
                 block: bool = False, block_backend: str = "auto"):
        p = f"model.layers.{i}."
        dev = lambda name: sd[p + name].to(device)  # noqa: E731
        norm = lambda name: dev(name).float() + config.norm_offset  # noqa: E731

        def linear(kind: str, *names: str) -> GpuLinear:
            weight, scale = fused_weight([sd[f"{p}{n}.weight"] for n in names],
                                         [sd.get(f"{p}{n}.weight_scale_inv") for n in names],
                                         device, dtype, keep_fp8=block and kind in fp8)
            return GpuLinear(weight, kind in fp8, dtype, block=block, weight_scale=scale,
                             block_backend=block_backend)

        self.ln1 = norm("input_layernorm.weight")
        self.post_attn = self.post_ff = None
        if config.sandwich_norm:  # Gemma: norms on each branch's output, pre-norm before MLP
            self.post_attn = norm("post_attention_layernorm.weight")
            self.ln2 = norm("pre_feedforward_layernorm.weight")
            self.post_ff = norm("post_feedforward_layernorm.weight")
        else:
            self.ln2 = norm("post_attention_layernorm.weight")
        self.layer_type = config.layer_types[i]
        self.window = config.sliding_window if config.is_sliding(i) else None
        self.qkv = linear("qkv", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
        self.o = linear("o", "self_attn.o_proj")
        self.gate_up = linear("gate_up", "mlp.gate_proj", "mlp.up_proj")
        self.down = linear("down", "mlp.down_proj")
        self.q_norm = norm("self_attn.q_norm.weight") if config.qk_norm else None
        self.k_norm = norm("self_attn.k_norm.weight") if config.qk_norm else None


class GpuCausalLM:
    """Same forward/logits contract as CausalLM; prefixes are PagedPrefix entries of `arena`."""

    def __init__(self, config: ModelConfig, state_dict: Mapping[str, torch.Tensor],
                 fp8: bool = False, device: torch.device | str = "cuda",
                 arena: PagedKVArena | None = None, dtype: torch.dtype = torch.bfloat16,
                 fp8_proj: tuple[str, ...] = FP8_PROJ, fp32_residual: bool | None = None,
                 prefix_backend: str = "auto", fp8_block: bool = False,
                 block_backend: str = "auto"):
        if config.family not in GPU_FAMILIES or config.attention_bias:
            raise ValueError(f"the GPU path supports {GPU_FAMILIES} without attention bias; "
                             f"got family {config.family!r}")
        if config.rope_scaling is not None:
            raise ValueError(f"the GPU path does not support RoPE scaling ({config.rope_scaling})")
        self.config = config
        self.fp8 = fp8
        self.fp8_block = fp8 and fp8_block  # 128 x 128 weight blocks, 1 x 128 activation groups
        self.group = GROUP if self.fp8_block else None
        self.fp8_proj = tuple(fp8_proj) if fp8 else ()
        unknown = set(self.fp8_proj) - set(FP8_PROJ)
        if unknown:
            raise ValueError(f"unknown fp8 projections {sorted(unknown)}; choose from {FP8_PROJ}")
        self.fp32_residual = (not fp8) if fp32_residual is None else fp32_residual
        if prefix_backend not in ("auto", "cudnn", "triton"):
            raise ValueError(f"prefix_backend must be auto, cudnn or triton, got {prefix_backend!r}")
        self.device = torch.device(device)
        self.dtype = dtype
        self.embed = state_dict["model.embed_tokens.weight"].to(self.device, self.dtype)
        # Gemma: embeddings times sqrt(hidden), the factor rounded to the model dtype (as HF)
        self.embed_scale = (torch.tensor(config.hidden_size ** 0.5, dtype=self.dtype,
                                         device=self.device) if config.embed_scale else None)
        self.activation = "gelu_tanh" if config.hidden_act == "gelu_tanh" else "silu"
        head = state_dict.get("lm_head.weight")
        self.lm_head = self.embed if head is None or config.tie_word_embeddings else \
            head.to(self.device, self.dtype)
        self.final_norm = state_dict["model.norm.weight"].to(self.device).float() + \
            config.norm_offset
        self.layers = [GpuLayer(state_dict, i, config, self.fp8_proj, self.device, dtype,
                                self.fp8_block, block_backend) for i in range(config.num_layers)]
        self.cos_sin = {"full_attention": rope_cos_sin(config.max_position, config.head_dim,
                                                       config.rope_theta, self.device)}
        if "sliding_attention" in config.layer_types:
            self.cos_sin["sliding_attention"] = rope_cos_sin(
                config.max_position, config.head_dim, config.rope_local_theta or config.rope_theta,
                self.device)
        self.arena = arena
        self.lib_attention = None
        # cuDNN's windows and key grains assume every key is visible: sliding-window models
        # keep their attention on Triton
        if prefix_backend != "triton" and "sliding_attention" not in config.layer_types:
            self.lib_attention = probe_cudnn(self.device, config.num_heads,
                                             config.num_kv_heads, config.head_dim, dtype)
            if self.lib_attention is None and prefix_backend == "cudnn":
                raise ValueError("prefix_backend='cudnn' but cuDNN fused attention does not run "
                                 f"on {self.device}")

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, cu_seqlens: torch.Tensor,
                prefixes: Sequence[PagedPrefix | None], read_index: torch.Tensor,
                store_kv: Sequence[bool] | None = None):
        """-> (hidden [R, H] before the final norm, per sequence the PagedPrefix of its prefix
        followed by its own tokens when store_kv[b], else None)."""
        if positions.device.type == "cpu" and positions.numel() and \
                int(positions.max()) >= self.config.max_position:
            raise ValueError(f"position {int(positions.max())} beyond max_position "
                             f"{self.config.max_position}")
        b = pack(input_ids, positions, cu_seqlens, prefixes, read_index, store_kv, self.arena,
                 self.device, self.lib_attention)
        return self._layers(b), b.stored

    def decode(self, input_ids: Sequence[int], prefixes: Sequence[PagedPrefix]) -> torch.Tensor:
        """One decode step: token b continues `prefixes[b]`, which grows by it in place (its
        holder owns it alone) -> hidden [B, H] before the final norm."""
        longest = max(p.num_tokens for p in prefixes)
        if longest >= self.config.max_position:
            raise ValueError(f"position {longest} beyond max_position {self.config.max_position}")
        return self._layers(pack_decode(input_ids, prefixes, self.arena, self.device))

    def _layers(self, b) -> torch.Tensor:
        """Every layer over the packed batch `b` -> hidden of its read rows."""
        cfg = self.config
        q8 = {name: name in self.fp8_proj for name in FP8_PROJ}
        x = self.embed[b.input_ids]
        if self.embed_scale is not None:
            x = x * self.embed_scale
        if self.fp32_residual:
            x = x.float()  # the first add_rmsnorm keeps it as the float32 residual stream
        res = None
        last = len(self.layers) - 1
        for li, layer in enumerate(self.layers):
            h, res, s = add_rmsnorm(x, res, layer.ln1, cfg.rms_norm_eps, q8["qkv"], self.dtype,
                                    group_size=self.group)
            qkv = layer.qkv(h, s)
            q, k, v = qk_norm_rope(qkv, b.positions, self.cos_sin[layer.layer_type], layer.q_norm,
                                   layer.k_norm, cfg.num_heads, cfg.num_kv_heads,
                                   cfg.rms_norm_eps)
            if b.store_rows is not None:  # (a decode step stores every row, in order)
                self.arena.store(li, b.store_slots, k if b.decode else k[b.store_rows],
                                 v if b.decode else v[b.store_rows])
            arena_k = arena_v = None
            kv_scales: list[torch.Tensor] = []  # (an fp8 arena's)
            if b.has_prefix:
                arena_k, arena_v, *kv_scales = self.arena.layer(li)
            # block scheme: the attention writes bf16, quantized below in 1 x 128 groups
            a, s = layer_attention(q, k, v, b, arena_k, arena_v, cfg.attention_scale,
                                   q8["o"] and not self.fp8_block, self.lib_attention,
                                   layer.window, kv_scales)
            if li == last and not b.decode:  # only the rows that are read go on
                a, res, s = _rows(a, b.read_index), res[b.read_index], \
                    (s[b.read_index] if s is not None else None)
            if q8["o"] and self.fp8_block:
                a, s = quantize_groups(a)
            x = layer.o(a, s)
            if layer.post_attn is not None:
                x = add_rmsnorm(x, None, layer.post_attn, cfg.rms_norm_eps)[0]
            h, res, s = add_rmsnorm(x, res, layer.ln2, cfg.rms_norm_eps, q8["gate_up"],
                                    self.dtype, group_size=self.group)
            a, s = silu_mul(layer.gate_up(h, s), fp8=q8["down"], activation=self.activation,
                            group_size=self.group)
            x = layer.down(a, s)
            if layer.post_ff is not None:
                x = add_rmsnorm(x, None, layer.post_ff, cfg.rms_norm_eps)[0]
        return (x.float() + res.float()).to(self.dtype)

    def logits(self, hidden: torch.Tensor, token_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Final norm + LM head restricted to `token_ids` (all if None), in float32."""
        weight = self.lm_head if token_ids is None else self.lm_head[token_ids]
        return self._softcap(self._final_norm(hidden) @ weight.float().t())

    def vocab_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The whole vocabulary's logits (label scoring's normalizer) on the tensor cores: the
        normed hidden state rounded to the model's dtype (as HF rounds it), the GEMM in that
        dtype accumulating in float32, float32 out where torch offers it (else the dtype's
        logits, HF's own). `logits` runs float32 on the CUDA cores, a fraction of the tensor
        cores' rate: a full-vocabulary head over every label token of a many-class
        classification would take a large share of its query's time there."""
        if self.dtype not in (torch.bfloat16, torch.float16):
            return self.logits(hidden)
        h = self._final_norm(hidden).to(self.dtype)
        return self._softcap(_mm_float_out(h, self.lm_head.t()))

    def _final_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        h = hidden.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.config.rms_norm_eps)
        return h.to(self.dtype).float() * self.final_norm

    def _softcap(self, out: torch.Tensor) -> torch.Tensor:
        cap = self.config.final_logit_softcapping
        return torch.tanh(out / cap) * cap if cap else out


_FLOAT_OUT: dict[str, bool] = {}  # device type -> whether torch.mm(..., out_dtype=) runs there


def _mm_float_out(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in their dtype, accumulated in float32, as float32 (torch.mm's out_dtype, CUDA
    only); where it is not offered, the product in the dtype, then float32."""
    kind = a.device.type
    if _FLOAT_OUT.get(kind, True):
        try:
            out = torch.mm(a, b, out_dtype=torch.float32)
            _FLOAT_OUT[kind] = True
            return out
        except (RuntimeError, TypeError):  # NotImplementedError is a RuntimeError
            _FLOAT_OUT[kind] = False
    return (a @ b).float()
