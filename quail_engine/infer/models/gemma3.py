"""Gemma 3 (text): sandwich norms, (1 + w) RMSNorm, scaled embeddings, tanh-GELU, QK-norm,
sliding-window local layers with their own RoPE base, attention scale query_pre_attn_scalar^-1/2.
"""

from __future__ import annotations

from torch import Tensor

from quail_engine.infer.config import ModelConfig
from quail_engine.infer.models import hf_config
from quail_engine.infer.models.base import CausalLM
from quail_engine.infer.models.decoder import BatchMeta, DecoderLayer
from quail_engine.infer.models.layers import RMSNorm

MODEL_TYPES = ("gemma3_text", "gemma3")


class Gemma3DecoderLayer(DecoderLayer):
    """h = x + norm(attn(norm(x))); out = h + norm(mlp(norm(h)))."""

    def __init__(self, config: ModelConfig, layer: int):
        super().__init__(config, layer)
        dim, eps, offset = config.hidden_size, config.rms_norm_eps, config.norm_offset
        self.pre_feedforward_layernorm = RMSNorm(dim, eps, offset)
        self.post_feedforward_layernorm = RMSNorm(dim, eps, offset)

    def forward(self, x: Tensor, meta: BatchMeta) -> tuple[Tensor, Tensor, Tensor]:
        attn, k, v = self.self_attn(self.input_layernorm(x), meta)
        h = x + self.post_attention_layernorm(attn)
        mlp = self.mlp(self.pre_feedforward_layernorm(h))
        return h + self.post_feedforward_layernorm(mlp), k, v


class Gemma3ForCausalLM(CausalLM):
    layer_class = Gemma3DecoderLayer


def layer_types(hf: dict) -> tuple[str, ...]:
    if hf.get("layer_types"):
        return tuple(hf["layer_types"])
    pattern = hf.get("sliding_window_pattern") or hf.get("_sliding_window_pattern") or 6
    return tuple("full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
                 for i in range(hf["num_hidden_layers"]))


def config_from_hf(hf: dict) -> ModelConfig:
    if "text_config" in hf:
        hf = {**hf["text_config"], "model_type": "gemma3_text"}
    for key in ("attn_logit_softcapping", "use_bidirectional_attention"):
        if hf.get(key):
            raise ValueError(f"Gemma 3 config with {key}={hf[key]!r} is not supported")
    local_theta, local_scaling = float(hf.get("rope_local_base_freq", 10000.0)), None
    if "sliding_attention" in (hf.get("rope_parameters") or {}):
        local_theta, local_scaling = hf_config.rope_parameters(hf, "sliding_attention")
    if local_scaling:
        raise ValueError(f"Gemma 3 local-layer RoPE scaling {local_scaling} is not supported")
    return hf_config.build(
        hf, "gemma3", hidden_act=hf_config.activation(hf, "gelu_pytorch_tanh"),
        qk_norm=True, norm_offset=1.0, embed_scale=True, sandwich_norm=True,
        layer_types=layer_types(hf), sliding_window=hf.get("sliding_window", 4096),
        rope_local_theta=local_theta,
        query_pre_attn_scalar=float(hf.get("query_pre_attn_scalar", 256)),
        final_logit_softcapping=hf.get("final_logit_softcapping"),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", True)),
        attention_bias=bool(hf.get("attention_bias", False)),
    )
