"""Qwen3: the Llama layout with per-head RMSNorm on queries and keys (before RoPE)."""

from __future__ import annotations

from quail_engine.infer.config import ModelConfig
from quail_engine.infer.models import hf_config
from quail_engine.infer.models.base import CausalLM
from quail_engine.infer.models.qwen2 import sliding_fields

MODEL_TYPES = ("qwen3",)


class Qwen3ForCausalLM(CausalLM):
    pass


def config_from_hf(hf: dict) -> ModelConfig:
    if hf.get("attention_bias"):
        raise ValueError("Qwen3 config with attention_bias=true is not supported")
    return hf_config.build(hf, "qwen3", qk_norm=True, **sliding_fields(hf))
