"""Cost model against hand-computed rooflines."""

import pytest

from quail_engine.plan.cost import DeviceSpec, ModelSpec, Work, request_work, seconds

# SmolLM2-135M's config.json fields.
SMOL = ModelSpec.from_config({
    "num_hidden_layers": 30, "hidden_size": 576, "num_attention_heads": 9,
    "num_key_value_heads": 3, "intermediate_size": 1536, "vocab_size": 49152,
}, name="smollm2")
DEV = DeviceSpec("toy", flops=1e12, bandwidth=1e11)


def test_config_fields_give_shapes():
    assert SMOL.head_dim == 64
    assert SMOL.attn_params == 2 * 576 * 576 + 2 * 576 * 192
    assert SMOL.mlp_params == 3 * 576 * 1536
    assert SMOL.kv_bytes_per_token == 2 * 30 * 3 * 64 * 2


def test_nested_text_config_and_missing_field():
    spec = ModelSpec.from_config({"text_config": {
        "num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "head_dim": 16,
        "intermediate_size": 32}})
    assert (spec.num_kv_heads, spec.head_dim) == (2, 16)
    with pytest.raises(ValueError, match="hidden_size"):
        ModelSpec.from_config({"num_hidden_layers": 2})


@pytest.mark.parametrize("work,passes,expected", [
    # one token: every part is memory bound (weights read once)
    (Work(fresh_tokens=1), 1,
     (30 * 884736 * 2 + 30 * 2654208 * 2) / 1e11),
    # 10k tokens: projections and MLP compute bound; no attention
    (Work(fresh_tokens=10_000), 1,
     2 * 10_000 * 30 * (884736 + 2654208) / 1e12),
    # attention only, memory bound by KV reads: 1e6 KV token reads
    (Work(kv_reads=1e6), 0, 1e6 * 23040 / 1e11),
    # attention only, compute bound: 1e9 pairs
    (Work(attention_pairs=1e9), 0, 4 * 1e9 * 9 * 64 * 30 / 1e12),
])
def test_roofline_hand_computed(work, passes, expected):
    assert seconds(SMOL, DEV, work, num_passes=passes) == pytest.approx(expected, rel=1e-9)


def test_parts_add_and_take_max_inside():
    both = Work(fresh_tokens=10_000, attention_pairs=1e9)
    assert seconds(SMOL, DEV, both) == pytest.approx(
        seconds(SMOL, DEV, Work(fresh_tokens=10_000)) + seconds(SMOL, DEV, Work(attention_pairs=1e9),
                                                                num_passes=0))


@pytest.mark.parametrize("p,s,new,expected", [
    (0, 4, False, Work(4, 10, 0, 0)),
    (10, 4, False, Work(4, 40 + 10, 0, 10)),
    (10, 4, True, Work(14, 50 + 55, 10, 10)),
])
def test_request_work(p, s, new, expected):
    assert request_work(p, s, new) == expected


def test_shared_prefix_is_cheaper_than_repeating_it():
    shared = request_work(300, 40, True) + request_work(300, 40, False).scaled(63)
    repeated = request_work(0, 340, False).scaled(64)
    assert shared.fresh_tokens == 300 + 64 * 40
    assert seconds(SMOL, DEV, shared) < seconds(SMOL, DEV, repeated) / 4
