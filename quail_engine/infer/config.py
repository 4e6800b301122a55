"""ModelConfig: the architecture numbers every part of the engine reads.

Built from a Hugging Face `config.json` (dict) by the family modules in `infer/models/`, or from
GGUF metadata by `infer/gguf.py`. Bad input raises ValueError naming the field and value.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

FAMILIES = ("llama", "qwen2", "qwen3", "gemma3")
LAYER_TYPES = ("full_attention", "sliding_attention")
ACTIVATIONS = ("silu", "gelu_tanh")
ROPE_TYPES = ("default", "linear", "llama3")


@dataclass
class ModelConfig:
    """Architecture of one decoder-only model.

    `layer_types[i]` is "full_attention" or "sliding_attention"; sliding layers attend to keys
    at positions p - k < `sliding_window` and use `rope_local_theta` when it is set.
    `rope_scaling` follows HF's rope_parameters minus rope_theta: {"rope_type": "linear",
    "factor": 8.0} or the llama3 keys; None means plain RoPE. Gemma-style knobs:
    `norm_offset` (RMSNorm multiplies by offset + w), `embed_scale` (embeddings times
    sqrt(hidden)), `sandwich_norm` (post-attention and pre/post-feedforward norms),
    `query_pre_attn_scalar` (attention scale is its -1/2 power; None means head_dim).
    """

    family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_position: int = 2048
    tie_word_embeddings: bool = False
    qk_norm: bool = False
    sliding_window: int | None = None
    layer_types: tuple[str, ...] = ()
    attention_bias: bool = False
    hidden_act: str = "silu"
    rope_local_theta: float | None = None
    rope_scaling: dict | None = None
    query_pre_attn_scalar: float | None = None
    norm_offset: float = 0.0
    embed_scale: bool = False
    sandwich_norm: bool = False
    final_logit_softcapping: float | None = None
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"unknown model family {self.family!r}; supported: {', '.join(FAMILIES)}")
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads",
                     "head_dim", "intermediate_size", "max_position"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.rope_theta <= 0:
            raise ValueError(f"rope_theta must be positive, got {self.rope_theta!r}")
        if self.rms_norm_eps <= 0:
            raise ValueError(f"rms_norm_eps must be positive, got {self.rms_norm_eps!r}")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act {self.hidden_act!r} not supported; use one of {ACTIVATIONS}")
        self.layer_types = tuple(self.layer_types) or ("full_attention",) * self.num_layers
        self.eos_token_ids = tuple(self.eos_token_ids)
        if len(self.layer_types) != self.num_layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries for {self.num_layers} layers")
        bad = sorted(set(self.layer_types) - set(LAYER_TYPES))
        if bad:
            raise ValueError(f"unknown layer type(s) {bad}; supported: {LAYER_TYPES}")
        if "sliding_attention" in self.layer_types and not self.sliding_window:
            raise ValueError("sliding_attention layers need a positive sliding_window")
        if self.sandwich_norm != (self.family == "gemma3"):
            raise ValueError(f"sandwich_norm={self.sandwich_norm} does not fit family {self.family!r}"
                             " (only gemma3 has post-attention and pre/post-feedforward norms)")
        if self.rope_scaling is not None:
            rope_type = self.rope_scaling.get("rope_type", "default")
            if rope_type not in ROPE_TYPES:
                raise ValueError(f"rope_type {rope_type!r} not supported; use one of {ROPE_TYPES}")

    @property
    def attention_scale(self) -> float:
        return (self.query_pre_attn_scalar or self.head_dim) ** -0.5

    def is_sliding(self, layer: int) -> bool:
        return self.layer_types[layer] == "sliding_attention"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown ModelConfig field(s): {unknown}")
        return cls(**data)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        return cls.from_dict(json.loads(Path(path).read_text()))
