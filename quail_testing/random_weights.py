"""Random weights in Hugging Face naming for a ModelConfig, and the public model shapes the GPU
checks and benchmarks use (no checkpoint reaches the GPU machine: speed is measured on random
weights of the real shapes, correctness against the plain-torch path on the same weights)."""

from __future__ import annotations

import torch

from quail_engine.infer.config import ModelConfig

SHAPES = {
    "qwen3-4b": dict(family="qwen3", vocab_size=151936, hidden_size=2560, num_layers=36,
                     num_heads=32, num_kv_heads=8, head_dim=128, intermediate_size=9728,
                     rope_theta=1_000_000.0, qk_norm=True, tie_word_embeddings=True,
                     max_position=40960),
    "qwen3-0.6b": dict(family="qwen3", vocab_size=151936, hidden_size=1024, num_layers=28,
                       num_heads=16, num_kv_heads=8, head_dim=128, intermediate_size=3072,
                       rope_theta=1_000_000.0, qk_norm=True, tie_word_embeddings=True,
                       max_position=40960),
    "gemma3-270m": dict(family="gemma3", vocab_size=262144, hidden_size=640, num_layers=18,
                        num_heads=4, num_kv_heads=1, head_dim=256, intermediate_size=2048,
                        rope_theta=1_000_000.0, rope_local_theta=10000.0, rms_norm_eps=1e-6,
                        qk_norm=True, norm_offset=1.0, embed_scale=True, sandwich_norm=True,
                        hidden_act="gelu_tanh", sliding_window=512, query_pre_attn_scalar=256.0,
                        layer_types=tuple("full_attention" if (i + 1) % 6 == 0
                                          else "sliding_attention" for i in range(18)),
                        tie_word_embeddings=True, max_position=32768),
    "smollm2-135m": dict(family="llama", vocab_size=49152, hidden_size=576, num_layers=30,
                         num_heads=9, num_kv_heads=3, head_dim=64, intermediate_size=1536,
                         rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                         max_position=8192),
}


def shape_config(name: str, **overrides) -> ModelConfig:
    if name not in SHAPES:
        raise ValueError(f"unknown model shape {name!r}; known: {sorted(SHAPES)}")
    fields = dict(SHAPES[name])
    fields.update(overrides)
    return ModelConfig(**fields)


def random_state_dict(config: ModelConfig, seed: int = 0, std: float = 0.02,
                      device: torch.device | str = "cpu",
                      dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """N(0, std) matrices, norm weights 1 + N(0, 0.1) as the model applies them (Gemma's
(1 + w) norms store w), HF parameter names (Gemma's sandwich norms included)."""
    g = torch.Generator(device=device).manual_seed(seed)
    c = config

    def mat(rows: int, cols: int) -> torch.Tensor:
        return (torch.randn(rows, cols, generator=g, device=device) * std).to(dtype)

    def norm(n: int) -> torch.Tensor:
        return (1 - c.norm_offset + 0.1 * torch.randn(n, generator=g, device=device)).to(dtype)

    q_dim, kv_dim = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    sd = {"model.embed_tokens.weight": mat(c.vocab_size, c.hidden_size),
          "model.norm.weight": norm(c.hidden_size)}
    if not c.tie_word_embeddings:
        sd["lm_head.weight"] = mat(c.vocab_size, c.hidden_size)
    for i in range(c.num_layers):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = norm(c.hidden_size)
        sd[p + "post_attention_layernorm.weight"] = norm(c.hidden_size)
        if c.sandwich_norm:
            sd[p + "pre_feedforward_layernorm.weight"] = norm(c.hidden_size)
            sd[p + "post_feedforward_layernorm.weight"] = norm(c.hidden_size)
        sd[p + "self_attn.q_proj.weight"] = mat(q_dim, c.hidden_size)
        sd[p + "self_attn.k_proj.weight"] = mat(kv_dim, c.hidden_size)
        sd[p + "self_attn.v_proj.weight"] = mat(kv_dim, c.hidden_size)
        sd[p + "self_attn.o_proj.weight"] = mat(c.hidden_size, q_dim)
        sd[p + "mlp.gate_proj.weight"] = mat(c.intermediate_size, c.hidden_size)
        sd[p + "mlp.up_proj.weight"] = mat(c.intermediate_size, c.hidden_size)
        sd[p + "mlp.down_proj.weight"] = mat(c.hidden_size, c.intermediate_size)
        if c.qk_norm:
            sd[p + "self_attn.q_norm.weight"] = norm(c.head_dim)
            sd[p + "self_attn.k_norm.weight"] = norm(c.head_dim)
    return sd
