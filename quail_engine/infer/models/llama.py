"""Llama family (SmolLM2, Llama 2/3): the plain pre-norm decoder with SiLU MLP."""

from __future__ import annotations

from quail_engine.infer.config import ModelConfig
from quail_engine.infer.models import hf_config
from quail_engine.infer.models.base import CausalLM

MODEL_TYPES = ("llama",)


class LlamaForCausalLM(CausalLM):
    pass


def config_from_hf(hf: dict) -> ModelConfig:
    for flag in ("mlp_bias", "attention_bias"):
        if hf.get(flag):
            raise ValueError(f"Llama config with {flag}=true is not supported")
    return hf_config.build(hf, "llama")
