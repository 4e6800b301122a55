"""Attention block and the pre-norm decoder layer (Llama/Qwen layout).

Module names match Hugging Face checkpoints (self_attn.q_proj, mlp.gate_proj, input_layernorm,
...) so a safetensors state dict loads without renaming.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from quail_engine.infer.attention import merge_attention, prefix_attention, varlen_causal_attention
from quail_engine.infer.config import ModelConfig
from quail_engine.infer.models.layers import GatedMLP, RMSNorm, apply_rope
from quail_engine.infer.models.prefix_kv import PrefixKV


@dataclass
class BatchMeta:
    """What every layer needs to know about the packed batch, computed once per forward.

    `prefix_groups`: (prefix, rows) pairs; rows [M] are the packed token rows of all sequences
    that attend to that prefix (several requests may share one prefix object).
    `rope`: per layer type, the (cos, sin) tables [T, head_dim] at the tokens' positions."""

    positions: Tensor
    cu_seqlens: Tensor
    prefix_groups: list[tuple[PrefixKV, Tensor]]
    rope: dict[str, tuple[Tensor, Tensor]]


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        self.layer = layer
        self.num_heads, self.num_kv_heads = config.num_heads, config.num_kv_heads
        self.head_dim = config.head_dim
        self.scale = config.attention_scale
        self.layer_type = config.layer_types[layer]
        self.sliding_window = config.sliding_window if config.is_sliding(layer) else None
        bias = config.attention_bias
        hidden, q_dim, kv_dim = config.hidden_size, self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(hidden, q_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, kv_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, kv_dim, bias=bias)
        self.o_proj = nn.Linear(q_dim, hidden, bias=False)
        if config.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps, config.norm_offset)
            self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps, config.norm_offset)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x: Tensor, meta: BatchMeta) -> tuple[Tensor, Tensor, Tensor]:
        """x [T, hidden] -> (out [T, hidden], keys, values [T, H_kv, D] post-RoPE)."""
        num_tokens = x.shape[0]
        q = self.q_proj(x).view(num_tokens, self.num_heads, self.head_dim)
        k = self.k_proj(x).view(num_tokens, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).view(num_tokens, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = meta.rope[self.layer_type]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out, lse = varlen_causal_attention(q, k, v, meta.cu_seqlens, self.scale, self.sliding_window)
        for prefix, rows in meta.prefix_groups:
            if prefix.num_tokens == 0:
                continue
            out_p, lse_p = prefix_attention(q[rows], meta.positions[rows], prefix.keys[self.layer],
                                            prefix.values[self.layer], self.scale, self.sliding_window)
            out[rows], _ = merge_attention(out[rows], lse[rows], out_p, lse_p)
        return self.o_proj(out.reshape(num_tokens, -1)), k, v


class DecoderLayer(nn.Module):
    """h = x + attn(norm(x)); out = h + mlp(norm(h))."""

    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        self.self_attn = Attention(config, layer)
        self.mlp = GatedMLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, config.norm_offset)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps,
                                                config.norm_offset)

    def forward(self, x: Tensor, meta: BatchMeta) -> tuple[Tensor, Tensor, Tensor]:
        attn, k, v = self.self_attn(self.input_layernorm(x), meta)
        h = x + attn
        return h + self.mlp(self.post_attention_layernorm(h)), k, v
