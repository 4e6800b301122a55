"""A restricted readout (the few vocabulary columns a yes/no or label answer reads) is computed
in float32 on a bfloat16 model, so margins are not differences of bf16-rounded logits."""

from __future__ import annotations

import torch

from quail_engine.infer.config import ModelConfig
from quail_engine.infer.models import build_model
from quail_testing.random_weights import random_state_dict

TINY = dict(family="qwen3", vocab_size=97, hidden_size=64, num_layers=2, num_heads=4,
            num_kv_heads=2, head_dim=16, intermediate_size=96, qk_norm=True,
            tie_word_embeddings=True, rope_theta=1e6, max_position=4096)


def test_restricted_logits_of_a_bf16_model_are_float32():
    config = ModelConfig(**TINY)
    model = build_model(config)
    model.load_state_dict(random_state_dict(config, seed=3, std=0.2), strict=False)
    model = model.to(torch.bfloat16).eval()
    hidden = torch.randn(5, config.hidden_size, dtype=torch.bfloat16,
                         generator=torch.Generator().manual_seed(0)) * 4
    ids = torch.tensor([3, 7])
    with torch.inference_mode():
        got = model.logits(hidden, ids)
        want = model.model.norm(hidden).float() @ model.lm_head.weight[ids].float().t()
        full = model.logits(hidden)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want)
    # the full head stays in the model's dtype (a full vocabulary in float32 is large)
    assert full.dtype == torch.bfloat16
    assert not torch.equal(got, got.to(torch.bfloat16).float())  # not bf16-rounded values
