"""Reading the fields every family shares out of a Hugging Face config.json dict."""

from __future__ import annotations

from typing import Any

from quail_engine.infer.config import ModelConfig

_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh",
                "gelu_tanh": "gelu_tanh"}


def require(hf: dict, key: str) -> Any:
    if key not in hf or hf[key] is None:
        raise ValueError(f"config.json lacks {key!r} (model_type {hf.get('model_type')!r})")
    return hf[key]


def rope_parameters(hf: dict, layer_type: str | None = None) -> tuple[float, dict | None]:
    """(rope_theta, scaling dict or None) from transformers 5 `rope_parameters` (flat or keyed by
    layer type) or the older `rope_theta` + `rope_scaling` fields."""
    params = hf.get("rope_parameters") or {}
    if layer_type is not None and layer_type in params:
        params = params[layer_type]
    elif "full_attention" in params:
        params = params["full_attention"]
    theta = params.get("rope_theta", hf.get("rope_theta", 10000.0))
    scaling = {k: v for k, v in params.items() if k != "rope_theta"} or hf.get("rope_scaling")
    if scaling:
        scaling = dict(scaling)
        if "type" in scaling and "rope_type" not in scaling:
            scaling["rope_type"] = scaling.pop("type")
        if scaling.get("rope_type", "default") == "default":
            scaling = None
    return float(theta), scaling or None


def activation(hf: dict, default: str = "silu") -> str:
    name = hf.get("hidden_activation") or hf.get("hidden_act") or default
    if name not in _ACTIVATIONS:
        raise ValueError(f"activation {name!r} not supported; use one of {sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]


def eos_ids(hf: dict) -> tuple[int, ...]:
    eos = hf.get("eos_token_id")
    if eos is None:
        return ()
    return tuple(eos) if isinstance(eos, list) else (int(eos),)


def common_fields(hf: dict, family: str) -> dict:
    """Keyword arguments for ModelConfig that mean the same in every family's config.json."""
    num_heads = require(hf, "num_attention_heads")
    hidden = require(hf, "hidden_size")
    theta, scaling = rope_parameters(hf)
    return dict(
        family=family,
        vocab_size=require(hf, "vocab_size"),
        hidden_size=hidden,
        num_layers=require(hf, "num_hidden_layers"),
        num_heads=num_heads,
        num_kv_heads=hf.get("num_key_value_heads") or num_heads,
        head_dim=hf.get("head_dim") or hidden // num_heads,
        intermediate_size=require(hf, "intermediate_size"),
        rope_theta=theta,
        rope_scaling=scaling,
        rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        max_position=int(hf.get("max_position_embeddings", 2048)),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        hidden_act=activation(hf),
        bos_token_id=hf.get("bos_token_id"),
        eos_token_ids=eos_ids(hf),
    )


def build(hf: dict, family: str, **overrides: Any) -> ModelConfig:
    fields = common_fields(hf, family)
    fields.update(overrides)
    return ModelConfig(**fields)
