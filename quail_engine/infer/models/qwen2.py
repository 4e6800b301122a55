"""Qwen2 / Qwen2.5: the Llama layout with biases on the q, k and v projections."""

from __future__ import annotations

from quail_engine.infer.config import ModelConfig
from quail_engine.infer.models import hf_config
from quail_engine.infer.models.base import CausalLM

MODEL_TYPES = ("qwen2",)


class Qwen2ForCausalLM(CausalLM):
    pass


def sliding_fields(hf: dict) -> dict:
    """Qwen configs carry sliding_window even when it is off; honour it only when enabled."""
    if not hf.get("use_sliding_window"):
        return {"sliding_window": None, "layer_types": ()}
    layer_types = hf.get("layer_types")
    if not layer_types:
        first_full = hf.get("max_window_layers", hf["num_hidden_layers"])
        layer_types = ["full_attention" if i < first_full else "sliding_attention"
                       for i in range(hf["num_hidden_layers"])]
    return {"sliding_window": hf.get("sliding_window"), "layer_types": tuple(layer_types)}


def config_from_hf(hf: dict) -> ModelConfig:
    return hf_config.build(hf, "qwen2", attention_bias=True, **sliding_fields(hf))
