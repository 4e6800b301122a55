"""attention.row_bound: each packed row's fp8 scale bound is the max |v| over its sequence's rows
up to it and its cached prefix's, as the one-pass kernel's epilogue takes it (so a row rounds
alike wherever its sequence was split into cached and fresh rows); the sequence -> segment index
it reads is the batch's, built once a pass."""

import torch
from test_gpu_model import _models, _pack

from quail_engine.infer.gpu.attention import row_bound
from quail_engine.infer.gpu.batch import pack


def _stored(fast, tokens):
    ids, pos, cu, reads = _pack([tokens], [0], "cpu")
    _, stored = fast.forward(ids, pos, cu, [None], reads, [True])
    return stored[0]


def test_row_bound_is_each_rows_running_max_over_its_prefix_and_rows_before_it():
    config, _, fast = _models("qwen3", "cpu")
    g = torch.Generator().manual_seed(5)
    draw = lambda n: torch.randint(0, 97, (n,), generator=g).tolist()  # noqa: E731
    first, second = _stored(fast, draw(40)), _stored(fast, draw(19))
    prefixes = [first, None, second, first]
    own = [draw(n) for n in (5, 7, 3, 4)]
    starts = [p.num_tokens if p is not None else 0 for p in prefixes]
    ids, pos, cu, reads = _pack(own, starts, "cpu")
    batch = pack(ids, pos, cu, prefixes, reads, None, fast.arena, torch.device("cpu"), None)
    v = torch.randn(ids.shape[0], config.num_kv_heads, config.head_dim, generator=g)
    v[batch.cu_seqlens[1] + 1] *= 50.0  # a peak inside a sequence: later rows only
    layer = 1
    _, arena_v, *_ = fast.arena.layer(layer)

    got = row_bound(v, batch, arena_v, None, {})
    again = row_bound(v * 0.5, batch, arena_v, None, {})  # (a later layer: index reused)

    flat = fast.arena.v[layer].flatten(0, 1)
    # packed order: sequences sharing a prefix sit together; map each packed sequence back by
    # its own tokens' content
    packed = [batch.input_ids[batch.cu_seqlens[i]:batch.cu_seqlens[i + 1]].tolist()
              for i in range(len(own))]
    source = [own.index(p) for p in packed]
    peaked = 0
    for scale, bound in ((1.0, got), (0.5, again)):
        for s in range(len(own)):
            first_row, end = int(batch.cu_seqlens[s]), int(batch.cu_seqlens[s + 1])
            p = prefixes[source[s]]
            for row in range(first_row, end):
                want = (v[first_row:row + 1] * scale).abs().amax()
                if p is not None:
                    want = torch.maximum(want, flat[p.slots()].abs().amax())
                assert torch.equal(bound[row], want.float()), (row, s)
        rows = slice(int(batch.cu_seqlens[1]), int(batch.cu_seqlens[2]))
        peaked += int((bound[rows] > 20 * scale).sum())
    # the peak raised its row and the rows after it in its sequence, not the row before
    assert peaked == 2 * (int(batch.cu_seqlens[2] - batch.cu_seqlens[1]) - 1)
