"""What one layer's attention launches in a pass over cached prefixes with fp8 output (the GPU
engine's path for joins and shared documents), counted on the CPU: torch operators dispatched
from the host and Triton kernels, for the first layer of a pass and for a later one.

A small pass (a few hundred tokens over an anchor) is as long as its launches take the host:
36 layers of them. QUAIL-B's timelines showed such passes at 47-62 ms on the H200 against 33-37 ms
on the code of sessions 18-20 (bench/results/quailb-gpu.md, session 48); this counts what the
host issues per layer, without a GPU (TRITON_INTERPRET runs the kernels; operators dispatched
inside a kernel's interpretation are not counted).

    TRITON_INTERPRET=1 python -m bench.probes.attention_launches
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import json  # noqa: E402
from collections import Counter  # noqa: E402

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

TINY = dict(family="qwen3", vocab_size=97, hidden_size=64, num_layers=2, num_heads=4,
            num_kv_heads=2, head_dim=16, intermediate_size=96, qk_norm=True,
            tie_word_embeddings=True, rope_theta=1e6, max_position=256)


class _Launches(TorchDispatchMode):
    """Counts torch operators dispatched from the host, and (through `triton_launch`) kernels."""

    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()
        self.kernels: Counter = Counter()
        self.inside = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.inside:
            self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def main() -> int:
    from triton.runtime.interpreter import InterpretedFunction

    from quail_engine.infer.config import ModelConfig
    from quail_engine.infer.gpu import attention
    from quail_engine.infer.gpu.batch import pack
    from quail_engine.infer.gpu.model import GpuCausalLM
    from quail_engine.infer.gpu.paged_kv import PagedKVArena
    from quail_testing.random_weights import random_state_dict

    counters: list[_Launches] = []
    run = InterpretedFunction.run

    def counted(self, *args, **kwargs):
        for c in counters:
            c.kernels[self.fn.__name__] += 1
            c.inside += 1
        try:
            return run(self, *args, **kwargs)
        finally:
            for c in counters:
                c.inside -= 1

    InterpretedFunction.run = counted
    config = ModelConfig(**TINY)
    arena = PagedKVArena(config.num_layers, config.num_kv_heads, config.head_dim, 16, 16,
                         torch.float32, "cpu")
    model = GpuCausalLM(config, random_state_dict(config, seed=1, std=0.2), device="cpu",
                        arena=arena, dtype=torch.float32)
    g = torch.Generator().manual_seed(3)

    def packed(seqs, starts):
        ids = torch.tensor([t for s in seqs for t in s])
        pos = torch.tensor([p for s, st in zip(seqs, starts) for p in range(st, st + len(s))])
        cu = torch.tensor([0, *torch.tensor([len(s) for s in seqs]).cumsum(0).tolist()],
                          dtype=torch.int32)
        return ids, pos, cu, cu[1:].long() - 1

    anchor = torch.randint(0, 97, (40,), generator=g).tolist()
    ids, pos, cu, reads = packed([anchor], [0])
    _, stored = model.forward(ids, pos, cu, [None], reads, [True])
    prefix = stored[0]
    own = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (5, 7, 3)]
    ids, pos, cu, reads = packed(own, [prefix.num_tokens] * len(own))
    batch = pack(ids, pos, cu, [prefix] * len(own), reads, None, arena, torch.device("cpu"),
                 None)
    rows = ids.shape[0]
    q = torch.randn(rows, config.num_heads, config.head_dim, generator=g)
    k = torch.randn(rows, config.num_kv_heads, config.head_dim, generator=g)
    v = torch.randn(rows, config.num_kv_heads, config.head_dim, generator=g)
    out = {}
    for name in ("first layer", "later layer"):
        arena_k, arena_v, *scales = arena.layer(0)
        count = _Launches()
        counters[:] = [count]
        with count:
            attention.layer_attention(q, k, v, batch, arena_k, arena_v, 0.1, True, None, None,
                                      scales)
        out[name] = {"torch_ops": sum(count.ops.values()), "kernels": sum(count.kernels.values()),
                     "ops": dict(count.ops.most_common()), "kernel_names": dict(count.kernels)}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
