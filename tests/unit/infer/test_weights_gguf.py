"""GGUF reading on tiny files written the way llama.cpp's converter writes them: Llama Q/K rows
permuted, Gemma norm weights with +1 folded in. Our dequantized weights must give transformers'
logits again."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from quail_engine.infer.gguf import gguf_state_dict, hf_config_from_gguf
from quail_engine.infer.models import config_from_hf
from quail_engine.infer.weights import model_from_state_dict

gguf = pytest.importorskip("gguf")

SHAPE = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6, max_position_embeddings=128)


def _llama_cpp_permute(weights: np.ndarray, num_heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py LlamaModel.permute (HF rotate-half -> llama.cpp interleaved)."""
    return (weights.reshape(num_heads, 2, weights.shape[0] // num_heads // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def _hf_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(**SHAPE, num_hidden_layers=2, rope_theta=20000.0,
                                        tie_word_embeddings=False))


def _hf_gemma3():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    return Gemma3ForCausalLM(Gemma3TextConfig(**SHAPE, num_hidden_layers=6, sliding_window=5,
                                              rope_theta=50000.0))


def _write_gguf(model, arch: str, path) -> None:
    config = model.config
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_key_length(config.head_dim)
    writer.add_value_length(config.head_dim)
    writer.add_rope_freq_base(config.rope_parameters.get("full_attention", config.rope_parameters)
                              ["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    if arch == "gemma3":
        writer.add_sliding_window(config.sliding_window)
    arch_id = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch)
    names = gguf.get_tensor_name_map(arch_id, config.num_hidden_layers)
    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        stem, _, suffix = hf_name.rpartition(".")
        name = f"{names.get_name(stem)}.{suffix}"
        data = tensor.float().numpy().copy()
        if arch == "llama" and ".attn_q." in name:
            data = _llama_cpp_permute(data, config.num_attention_heads)
        elif arch == "llama" and ".attn_k." in name:
            data = _llama_cpp_permute(data, config.num_key_value_heads)
        elif arch == "gemma3" and name.endswith("norm.weight"):
            data = data + 1.0
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("arch,build", [("llama", _hf_llama), ("gemma3", _hf_gemma3)])
def test_gguf_weights_reproduce_transformers_logits(tmp_path, tools, arch, build):
    torch.manual_seed(0)
    hf_model = build().float().eval()
    with torch.no_grad():
        for name, param in hf_model.named_parameters():
            if "norm" in name:
                param.add_(0.3 * torch.randn_like(param))
    path = tmp_path / f"tiny-{arch}.gguf"
    _write_gguf(hf_model, arch, path)
    reader = gguf.GGUFReader(str(path))
    hf = hf_config_from_gguf(reader)
    ours = model_from_state_dict(config_from_hf(hf), gguf_state_dict(reader, hf))
    prompt = torch.randint(0, 64, (11,), generator=torch.Generator().manual_seed(1)).tolist()
    with torch.no_grad():
        hidden, _ = ours(*tools.packed([prompt])[:4], torch.arange(len(prompt)))
        logits = ours.logits(hidden)
    assert tools.relative_error(logits, tools.hf_logits(hf_model, prompt)) <= 1e-5


def test_llama_q_weights_come_back_unpermuted(tmp_path):
    torch.manual_seed(0)
    hf_model = _hf_llama().eval()
    path = tmp_path / "tiny.gguf"
    _write_gguf(hf_model, "llama", path)
    reader = gguf.GGUFReader(str(path))
    state = gguf_state_dict(reader, hf_config_from_gguf(reader))
    for name in ("model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight"):
        assert torch.equal(state[name], hf_model.state_dict()[name])


def test_gguf_config_reads_ties_and_sliding_window(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "tiny-gemma.gguf"
    _write_gguf(_hf_gemma3().eval(), "gemma3", path)
    config = config_from_hf(hf_config_from_gguf(gguf.GGUFReader(str(path))))
    assert (config.family, config.tie_word_embeddings, config.sliding_window) == ("gemma3", True, 5)
    assert config.layer_types[4:] == ("sliding_attention", "full_attention")
    assert (config.rope_theta, config.rope_local_theta) == (50000.0, 10000.0)
