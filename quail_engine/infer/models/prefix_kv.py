"""PrefixKV: one sequence's keys and values for every layer, kept to be attended to later."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class PrefixKV:
    """Per layer, keys and values [num_tokens, num_kv_heads, head_dim], post-RoPE and post
    k-norm, for positions 0..num_tokens-1 (when it is a whole prefix) or for the tokens a
    forward pass ran (when `CausalLM.forward` returns it; `prefix.concat(new)` grows it)."""

    keys: list[Tensor]
    values: list[Tensor]
    num_tokens: int

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.values):
            raise ValueError(f"PrefixKV has {len(self.keys)} key and {len(self.values)} value layers")
        for k, v in zip(self.keys, self.values):
            if k.shape != v.shape or k.shape[0] != self.num_tokens:
                raise ValueError(
                    f"PrefixKV layer shapes {tuple(k.shape)}/{tuple(v.shape)} do not match "
                    f"num_tokens={self.num_tokens}")

    def concat(self, other: PrefixKV) -> PrefixKV:
        """This KV followed by `other`'s tokens (decode growth); a new object."""
        if len(other.keys) != len(self.keys):
            raise ValueError(f"cannot concat PrefixKV of {len(other.keys)} layers to {len(self.keys)}")
        return PrefixKV(
            keys=[torch.cat((a, b)) for a, b in zip(self.keys, other.keys)],
            values=[torch.cat((a, b)) for a, b in zip(self.values, other.values)],
            num_tokens=self.num_tokens + other.num_tokens,
        )

    def to(self, device: torch.device | str) -> PrefixKV:
        return PrefixKV([k.to(device) for k in self.keys], [v.to(device) for v in self.values],
                        self.num_tokens)

    @property
    def nbytes(self) -> int:
        """Bytes held by all layers' keys and values."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))
