"""Model families. `family_for(hf_config)` picks the module; `build_model(config)` the class."""

from __future__ import annotations

from types import ModuleType

from quail_engine.infer.config import ModelConfig
from quail_engine.infer.models import gemma3, llama, qwen2, qwen3
from quail_engine.infer.models.base import CausalLM, PrefixKV

__all__ = ["CausalLM", "PrefixKV", "build_model", "config_from_hf", "family_for"]

FAMILY_MODULES: dict[str, ModuleType] = {"llama": llama, "qwen2": qwen2, "qwen3": qwen3,
                                         "gemma3": gemma3}
MODEL_CLASSES: dict[str, type[CausalLM]] = {
    "llama": llama.LlamaForCausalLM, "qwen2": qwen2.Qwen2ForCausalLM,
    "qwen3": qwen3.Qwen3ForCausalLM, "gemma3": gemma3.Gemma3ForCausalLM,
}


def family_for(hf: dict) -> ModuleType:
    model_type = hf.get("model_type")
    for module in FAMILY_MODULES.values():
        if model_type in module.MODEL_TYPES:
            return module
    known = sorted(t for m in FAMILY_MODULES.values() for t in m.MODEL_TYPES)
    raise ValueError(f"model_type {model_type!r} is not supported; supported: {', '.join(known)}")


def config_from_hf(hf: dict) -> ModelConfig:
    """ModelConfig from a Hugging Face config.json dict."""
    return family_for(hf).config_from_hf(hf)


def build_model(config: ModelConfig) -> CausalLM:
    return MODEL_CLASSES[config.family](config)
