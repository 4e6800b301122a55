"""ModelConfig validation and reading Hugging Face config.json dicts."""

from __future__ import annotations

import pytest

from quail_engine.infer.config import ModelConfig
from quail_engine.infer.models import config_from_hf

BASE = dict(family="llama", vocab_size=10, hidden_size=8, num_layers=2, num_heads=2,
            num_kv_heads=1, head_dim=4, intermediate_size=16)


@pytest.mark.parametrize("override,message", [
    ({"family": "gpt2"}, "unknown model family 'gpt2'"),
    ({"num_layers": 0}, "num_layers must be a positive integer, got 0"),
    ({"hidden_size": "8"}, "hidden_size must be a positive integer, got '8'"),
    ({"num_heads": 3, "num_kv_heads": 2}, "num_heads (3) must be a multiple of num_kv_heads (2)"),
    ({"hidden_act": "relu"}, "hidden_act 'relu' not supported"),
    ({"layer_types": ("full_attention",)}, "layer_types has 1 entries for 2 layers"),
    ({"layer_types": ("full_attention", "local")}, "unknown layer type(s) ['local']"),
    ({"layer_types": ("full_attention", "sliding_attention")}, "need a positive sliding_window"),
    ({"rope_scaling": {"rope_type": "yarn"}}, "rope_type 'yarn' not supported"),
    ({"rope_theta": 0.0}, "rope_theta must be positive"),
    ({"sandwich_norm": True}, "sandwich_norm=True does not fit family 'llama'"),
])
def test_bad_config_raises_value_error_naming_the_field(override, message):
    with pytest.raises(ValueError) as err:
        ModelConfig(**{**BASE, **override})
    assert message in str(err.value)


def test_config_round_trips_through_json(tmp_path):
    config = ModelConfig(**BASE, sliding_window=3,
                         layer_types=("sliding_attention", "full_attention"))
    config.save(tmp_path / "c.json")
    assert ModelConfig.load(tmp_path / "c.json") == config


HF_LLAMA = {"model_type": "llama", "vocab_size": 32, "hidden_size": 16, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 32}


@pytest.mark.parametrize("hf,field,expected", [
    (HF_LLAMA, "head_dim", 4),
    (HF_LLAMA, "rope_theta", 10000.0),
    ({**HF_LLAMA, "rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 4.0}},
     "rope_scaling", {"rope_type": "linear", "factor": 4.0}),
    ({**HF_LLAMA, "rope_parameters": {"rope_type": "default", "rope_theta": 1e5}}, "rope_scaling",
     None),
    ({**HF_LLAMA, "model_type": "qwen2"}, "attention_bias", True),
    ({**HF_LLAMA, "model_type": "qwen2", "sliding_window": 4, "use_sliding_window": False},
     "sliding_window", None),
    ({**HF_LLAMA, "model_type": "qwen3"}, "qk_norm", True),
    ({**HF_LLAMA, "model_type": "gemma3_text"}, "layer_types",
     ("sliding_attention", "sliding_attention")),
    ({**HF_LLAMA, "model_type": "gemma3_text", "rope_theta": 1e6}, "rope_local_theta", 10000.0),
    ({**HF_LLAMA, "model_type": "gemma3_text", "rope_local_base_freq": 500.0},
     "rope_local_theta", 500.0),
    ({**HF_LLAMA, "model_type": "gemma3_text"}, "norm_offset", 1.0),
    ({**HF_LLAMA, "eos_token_id": [1, 106]}, "eos_token_ids", (1, 106)),
])
def test_hf_config_fields(hf, field, expected):
    assert getattr(config_from_hf(hf), field) == expected


@pytest.mark.parametrize("hf,message", [
    ({**HF_LLAMA, "model_type": "mistral"}, "model_type 'mistral' is not supported"),
    ({k: v for k, v in HF_LLAMA.items() if k != "hidden_size"}, "config.json lacks 'hidden_size'"),
    ({**HF_LLAMA, "hidden_act": "relu"}, "activation 'relu' not supported"),
    ({**HF_LLAMA, "model_type": "gemma3_text", "attn_logit_softcapping": 50.0},
     "attn_logit_softcapping=50.0 is not supported"),
])
def test_unsupported_hf_configs_are_refused(hf, message):
    with pytest.raises(ValueError) as err:
        config_from_hf(hf)
    assert message in str(err.value)
