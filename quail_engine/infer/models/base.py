"""CausalLM: the packed, prefix-aware forward pass every model family shares.

One call runs B sequences packed into T tokens (no padding). Sequence b owns rows
cu_seqlens[b]:cu_seqlens[b+1]; if prefixes[b] is set it also attends to that KV (its positions
then start at prefix.num_tokens). The pass returns the last layer's hidden states at
`read_index` only; `logits` turns them into scores over a chosen set of token ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from quail_engine.infer.config import ModelConfig
from quail_engine.infer.interrupt import StopFlag
from quail_engine.infer.models.decoder import BatchMeta, DecoderLayer
from quail_engine.infer.models.layers import RMSNorm, RotaryEmbedding
from quail_engine.infer.models.prefix_kv import PrefixKV

__all__ = ["CausalLM", "PrefixKV"]


class DecoderStack(nn.Module):
    """HF's `model.` submodule: embeddings, layers, final norm."""

    def __init__(self, config: ModelConfig, layer_class: type[nn.Module]):
        super().__init__()
        # _weight skips the random init (on the meta device it would import torch._dynamo, slowly)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size,
                                         _weight=torch.empty(config.vocab_size, config.hidden_size))
        self.layers = nn.ModuleList(layer_class(config, i) for i in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, config.norm_offset)


class CausalLM(nn.Module):
    """Decoder-only LM; families subclass it to change `layer_class` or the embedding."""

    layer_class: type[nn.Module] = DecoderLayer

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.stop: StopFlag | None = None  # checked between layers (infer/interrupt.py)
        self.model = DecoderStack(config, self.layer_class)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.tie_weights()
        self.rotary = {"full_attention": RotaryEmbedding(config.head_dim, config.rope_theta,
                                                         config.rope_scaling)}
        if "sliding_attention" in config.layer_types:
            local_theta = config.rope_local_theta or config.rope_theta
            local_scaling = None if config.rope_local_theta else config.rope_scaling
            self.rotary["sliding_attention"] = RotaryEmbedding(config.head_dim, local_theta,
                                                               local_scaling)

    def tie_weights(self) -> None:
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def embed(self, input_ids: Tensor) -> Tensor:
        hidden = self.model.embed_tokens(input_ids)
        if self.config.embed_scale:  # Gemma: times sqrt(hidden), rounded to the weights' dtype
            weight = self.model.embed_tokens.weight
            hidden = hidden * weight.new_tensor(self.config.hidden_size ** 0.5)
        return hidden

    def forward(self, input_ids: Tensor, positions: Tensor, cu_seqlens: Tensor,
                prefixes: Sequence[PrefixKV | None], read_index: Tensor,
                store_kv: Sequence[bool] | None = None) -> tuple[Tensor, list[PrefixKV | None]]:
        """Packed forward. Returns (hidden [R, hidden] at rows `read_index`, before the final
        norm; per sequence, the KV of its own tokens when store_kv[b] else None). Grow a cache
        with `prefix.concat(returned)`."""
        meta = self._batch_meta(input_ids, positions, cu_seqlens, prefixes, read_index)
        num_seqs = len(prefixes)
        store = list(store_kv) if store_kv is not None else [False] * num_seqs
        if len(store) != num_seqs:
            raise ValueError(f"store_kv has {len(store)} entries for {num_seqs} sequences")
        bounds = cu_seqlens.tolist()
        kept: list[tuple[list[Tensor], list[Tensor]] | None] = [([], []) if s else None for s in store]
        h = self.embed(input_ids)
        for layer in self.model.layers:
            if self.stop is not None:
                self.stop.check()
            h, k, v = layer(h, meta)
            for b, slot in enumerate(kept):
                if slot is not None:
                    slot[0].append(k[bounds[b]:bounds[b + 1]].clone())
                    slot[1].append(v[bounds[b]:bounds[b + 1]].clone())
        new_kv = [None if slot is None else PrefixKV(slot[0], slot[1], bounds[b + 1] - bounds[b])
                  for b, slot in enumerate(kept)]
        return h[read_index], new_kv

    def logits(self, hidden: Tensor, token_ids: Tensor | None = None) -> Tensor:
        """Final norm + LM head, restricted to rows `token_ids` of the vocabulary (all if None);
        Gemma's final logit softcapping when configured. [R, hidden] -> [R, V']. A restricted
        head (a yes/no or label readout: a few columns) runs in float32 whatever the model's
        dtype, as the GPU path does: in bfloat16 each logit would be rounded to 8 bits of
        mantissa, so a margin (a difference of logits near 10) would move in steps of 1/8."""
        if token_ids is None:
            out = self.model.norm(hidden) @ self.lm_head.weight.t()
        else:
            weight = self.lm_head.weight[token_ids]
            out = self.model.norm(hidden).float() @ weight.float().t()
        cap = self.config.final_logit_softcapping
        if cap:
            out = torch.tanh(out / cap) * cap
        return out

    def _batch_meta(self, input_ids: Tensor, positions: Tensor, cu_seqlens: Tensor,
                    prefixes: Sequence[PrefixKV | None], read_index: Tensor) -> BatchMeta:
        num_tokens = input_ids.shape[0]
        if input_ids.dim() != 1 or positions.shape != input_ids.shape:
            raise ValueError(f"input_ids {tuple(input_ids.shape)} and positions "
                             f"{tuple(positions.shape)} must be equal 1-D shapes")
        bounds = cu_seqlens.tolist()
        if cu_seqlens.dim() != 1 or bounds[0] != 0 or bounds[-1] != num_tokens or any(
                a > b for a, b in zip(bounds[:-1], bounds[1:])):
            raise ValueError(f"cu_seqlens {bounds} must rise from 0 to {num_tokens}")
        if len(prefixes) != len(bounds) - 1:
            raise ValueError(f"{len(prefixes)} prefixes for {len(bounds) - 1} sequences")
        if read_index.numel() and (int(read_index.min()) < 0 or int(read_index.max()) >= num_tokens):
            raise ValueError(f"read_index outside 0..{num_tokens - 1}")
        groups: dict[int, tuple[PrefixKV, list[int]]] = {}
        for b, prefix in enumerate(prefixes):
            if prefix is None:
                continue
            if len(prefix.keys) != self.config.num_layers:
                raise ValueError(f"prefix {b} has {len(prefix.keys)} layers, model has "
                                 f"{self.config.num_layers}")
            groups.setdefault(id(prefix), (prefix, []))[1].extend(range(bounds[b], bounds[b + 1]))
        device = input_ids.device
        prefix_groups = [(p, torch.tensor(rows, dtype=torch.long, device=device))
                         for p, rows in groups.values() if rows]
        dtype = self.model.embed_tokens.weight.dtype
        rope = {name: rot(positions, dtype) for name, rot in self.rotary.items()}
        return BatchMeta(positions, cu_seqlens, prefix_groups, rope)
