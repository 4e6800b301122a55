"""Our packed / prefix-aware forward equals transformers' forward on tiny random models of
every family (fp32, relative error <= 1e-4)."""

from __future__ import annotations

import json

import pytest
import torch

from quail_engine.infer.models import config_from_hf
from quail_engine.infer.weights import load_safetensors_model

TOL = 1e-4


@pytest.fixture(scope="module")
def pair(tiny_hf_model):
    name, hf_model, directory = tiny_hf_model
    config = config_from_hf(json.loads((directory / "config.json").read_text()))
    return name, hf_model, load_safetensors_model(directory, config, "cpu", torch.float32)


def _prompt(seed: int, length: int, vocab: int = 96) -> list[int]:
    return torch.randint(0, vocab, (length,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_plain_request_matches_every_position(tools, pair):
    _, hf_model, ours = pair
    prompt = _prompt(1, 14)
    ids, pos, cu, prefixes, _ = tools.packed([prompt])
    with torch.no_grad():
        hidden, kv = ours(ids, pos, cu, prefixes, torch.arange(len(prompt)))
        logits = ours.logits(hidden)
    assert kv == [None]
    assert tools.relative_error(logits, tools.hf_logits(hf_model, prompt)) <= TOL


@pytest.mark.parametrize("lengths", [(1, 7, 13), (9, 2), (16, 16, 3, 1)])
def test_packed_batch_of_mixed_lengths(tools, pair, lengths):
    _, hf_model, ours = pair
    prompts = [_prompt(10 + i, n) for i, n in enumerate(lengths)]
    with torch.no_grad():
        hidden, _ = ours(*tools.packed(prompts))
        logits = ours.logits(hidden)
    for row, prompt in enumerate(prompts):
        assert tools.relative_error(logits[row], tools.hf_logits(hf_model, prompt)[-1]) <= TOL


@pytest.mark.parametrize("prefix_len,suffix_lens", [(9, (3, 6, 1)), (2, (12,)), (20, (4, 4))])
def test_prefix_shared_requests_match_unshared_prompts(tools, pair, prefix_len, suffix_lens):
    _, hf_model, ours = pair
    prefix = _prompt(99, prefix_len)
    suffixes = [_prompt(200 + i, n) for i, n in enumerate(suffix_lens)]
    with torch.no_grad():
        _, (kv,) = ours(*tools.packed([prefix])[:4], torch.zeros(0, dtype=torch.long), store_kv=[True])
        hidden, _ = ours(*tools.packed(suffixes, [kv] * len(suffixes), [prefix_len] * len(suffixes)))
        logits = ours.logits(hidden)
    assert kv.num_tokens == prefix_len
    for row, suffix in enumerate(suffixes):
        assert tools.relative_error(logits[row], tools.hf_logits(hf_model, prefix + suffix)[-1]) <= TOL


def test_mixed_batch_with_and_without_prefixes(tools, pair):
    _, hf_model, ours = pair
    prefix_a, prefix_b = _prompt(5, 8), _prompt(6, 11)
    with torch.no_grad():
        _, (kv_a, kv_b) = ours(*tools.packed([prefix_a, prefix_b])[:4], torch.zeros(0, dtype=torch.long),
                               store_kv=[True, True])
        own = [_prompt(7, 3), _prompt(8, 5), _prompt(9, 2), _prompt(10, 4)]
        hidden, _ = ours(*tools.packed(own, [kv_a, None, kv_b, kv_a], [8, 0, 11, 8]))
        logits = ours.logits(hidden)
    full = [prefix_a + own[0], own[1], prefix_b + own[2], prefix_a + own[3]]
    for row, prompt in enumerate(full):
        assert tools.relative_error(logits[row], tools.hf_logits(hf_model, prompt)[-1]) <= TOL


def test_greedy_decode_with_growing_kv_matches_full_recompute(tools, pair):
    _, hf_model, ours = pair
    tokens = _prompt(3, 6)
    with torch.no_grad():
        hidden, (kv,) = ours(*tools.packed([tokens]), store_kv=[True])
        for _ in range(5):
            next_token = int(ours.logits(hidden)[0].argmax())
            reference = tools.hf_logits(hf_model, tokens)[-1]
            assert next_token == int(reference.argmax())
            tokens = tokens + [next_token]
            step = tools.packed([[next_token]], [kv], [kv.num_tokens])
            hidden, (new,) = ours(*step, store_kv=[True])
            kv = kv.concat(new)
    assert kv.num_tokens == len(tokens)
    assert tools.relative_error(ours.logits(hidden)[0], tools.hf_logits(hf_model, tokens)[-1]) <= TOL


def test_trimmed_lm_head_equals_columns_of_full_logits(tools, pair):
    _, _, ours = pair
    prompt = _prompt(4, 5)
    token_ids = torch.tensor([7, 3, 90, 3])
    with torch.no_grad():
        hidden, _ = ours(*tools.packed([prompt]))
        assert torch.allclose(ours.logits(hidden, token_ids), ours.logits(hidden)[:, token_ids])


def test_stored_kv_is_per_layer_and_sized(tools, pair):
    _, _, ours = pair
    config = ours.config
    with torch.no_grad():
        _, kvs = ours(*tools.packed([_prompt(1, 4), _prompt(2, 6)]), store_kv=[False, True])
    assert kvs[0] is None and kvs[1].num_tokens == 6
    assert len(kvs[1].keys) == config.num_layers
    assert kvs[1].keys[0].shape == (6, config.num_kv_heads, config.head_dim)
    assert kvs[1].nbytes == 2 * config.num_layers * 6 * config.num_kv_heads * config.head_dim * 4
