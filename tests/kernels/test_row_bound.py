"""attention.row_bound: each packed row's fp8 scale bound is the max |v| over its whole sequence,
its own rows and its cached prefix's, as the one-pass kernel's epilogue takes it; the row ->
sequence and row -> segment indices it reads are the batch's, built once a pass."""

import torch
from test_gpu_model import _models, _pack

from quail_engine.infer.gpu.attention import row_bound
from quail_engine.infer.gpu.batch import pack


def _stored(fast, tokens):
    ids, pos, cu, reads = _pack([tokens], [0], "cpu")
    _, stored = fast.forward(ids, pos, cu, [None], reads, [True])
    return stored[0]


def test_row_bound_is_each_rows_sequence_max_over_own_and_prefix_rows():
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
    layer = 1
    _, arena_v, *_ = fast.arena.layer(layer)

    got = row_bound(v, batch, arena_v, None, {})
    again = row_bound(v * 0.5, batch, arena_v, None, {})  # (a later layer: indices reused)

    flat = fast.arena.v[layer].flatten(0, 1)
    seq_of_row = torch.repeat_interleave(torch.arange(len(own)), batch.cu_seqlens.diff())
    order = [int(s) for s in seq_of_row]
    # packed order: sequences sharing a prefix sit together; map each packed sequence back by
    # its own tokens' content
    packed = [batch.input_ids[batch.cu_seqlens[i]:batch.cu_seqlens[i + 1]].tolist()
              for i in range(len(own))]
    source = [own.index(p) for p in packed]
    for scale, bound in ((1.0, got), (0.5, again)):
        for row, s in enumerate(order):
            rows = v[batch.cu_seqlens[s]:batch.cu_seqlens[s + 1]] * scale
            want = rows.abs().amax()
            p = prefixes[source[s]]
            if p is not None:
                want = torch.maximum(want, flat[p.slots()].abs().amax())
            assert torch.equal(bound[row], want.float()), (row, s)
