"""Tiny random-initialised Hugging Face models of every family, saved as safetensors dirs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

TINY = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
            rms_norm_eps=1e-6)


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(**TINY, rope_theta=10000.0, tie_word_embeddings=True))


def _llama3_rope():
    from transformers import LlamaConfig, LlamaForCausalLM
    rope = {"rope_type": "llama3", "rope_theta": 50000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    return LlamaForCausalLM(LlamaConfig(**TINY, rope_parameters=rope, tie_word_embeddings=False))


def _qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    return Qwen2ForCausalLM(Qwen2Config(**TINY, tie_word_embeddings=False))


def _qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM
    return Qwen3ForCausalLM(Qwen3Config(**TINY, tie_word_embeddings=True))


def _gemma3():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    config = Gemma3TextConfig(**TINY, sliding_window=5, query_pre_attn_scalar=24,
                              layer_types=["sliding_attention", "full_attention",
                                           "sliding_attention"],
                              final_logit_softcapping=30.0,
                              rope_parameters={"full_attention": {"rope_type": "linear",
                                                                  "rope_theta": 100000.0,
                                                                  "factor": 2.0},
                                               "sliding_attention": {"rope_type": "default",
                                                                     "rope_theta": 1000.0}})
    return Gemma3ForCausalLM(config)


TINY_FAMILIES = {"llama": _llama, "llama3_rope": _llama3_rope, "qwen2": _qwen2,
                 "qwen3": _qwen3, "gemma3": _gemma3}


def _randomise(model: torch.nn.Module, seed: int) -> None:
    """HF init leaves norms at 1 (or 0 for Gemma) and biases at 0; perturb everything so a
    missed bias, norm offset or weight tie shows in the logits."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1.0 + 0.3 * torch.randn(param.shape, generator=gen)
                            if "gemma" not in type(model).__name__.lower()
                            else 0.3 * torch.randn(param.shape, generator=gen))
            else:
                param.copy_(0.08 * torch.randn(param.shape, generator=gen))


@pytest.fixture(scope="session", params=sorted(TINY_FAMILIES))
def tiny_hf_model(request, tmp_path_factory):
    """(name, HF model in fp32 eval mode, dir holding config.json + model.safetensors)."""
    torch.manual_seed(0)
    model = TINY_FAMILIES[request.param]().float().eval()
    _randomise(model, seed=len(request.param))
    directory = tmp_path_factory.mktemp(f"tiny_{request.param}")
    model.save_pretrained(directory, safe_serialization=True)
    return request.param, model, directory


def relative_error(ours: torch.Tensor, ref: torch.Tensor) -> float:
    return ((ours.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def hf_logits(model, ids, last_only: bool = False) -> torch.Tensor:
    """Hugging Face full forward pass over one prompt: logits [len(ids), vocab] (or [1, vocab]
    for the last position only)."""
    with torch.no_grad():
        return model(torch.tensor([list(ids)]), logits_to_keep=int(last_only)).logits[0].float()


def packed(prompts, prefixes=None, starts=None):
    """(input_ids, positions, cu_seqlens, prefixes, read_index at each prompt's last token)."""
    starts = starts or [0] * len(prompts)
    ids = torch.tensor([t for p in prompts for t in p])
    positions = torch.cat([torch.arange(s, s + len(p)) for s, p in zip(starts, prompts)])
    lengths = torch.tensor([len(p) for p in prompts])
    cu = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]).to(torch.int32)
    return ids, positions, cu, prefixes or [None] * len(prompts), cu[1:].long() - 1


@pytest.fixture(scope="session")
def tools():
    """The helpers above, for test modules (importing `conftest` by name is ambiguous when
    several test folders have one)."""
    return SimpleNamespace(relative_error=relative_error, hf_logits=hf_logits, packed=packed)
