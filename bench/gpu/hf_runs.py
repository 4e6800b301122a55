"""transformers baselines on the same shapes: sdpa, bf16, padded batches, last-token logits;
on the join, every pair's whole prompt (measured on a subsample, extrapolated), and a
hand-rolled reuse: the anchor's KV computed once with use_cache and repeated across a batch of
partner suffixes."""

from __future__ import annotations

import time

import torch

from bench.gpu.workloads import FilterWork, JoinWork


def hf_model(config):
    import transformers
    kwargs = dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                  intermediate_size=config.intermediate_size,
                  num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
                  num_key_value_heads=config.num_kv_heads, head_dim=config.head_dim,
                  tie_word_embeddings=config.tie_word_embeddings,
                  max_position_embeddings=config.max_position)
    cls_cfg = transformers.Qwen3Config if config.family == "qwen3" else transformers.LlamaConfig
    cfg = cls_cfg(**kwargs)
    cfg._attn_implementation = "sdpa"
    cls = (transformers.Qwen3ForCausalLM if config.family == "qwen3"
           else transformers.LlamaForCausalLM)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = cls(cfg)
    finally:
        torch.set_default_dtype(previous)
    return model.eval(), cfg


def _left_pad(seqs: list[list[int]]):
    width = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s):] = torch.tensor(s)
        mask[i, width - len(s):] = 1
    return ids.cuda(), mask.cuda()


@torch.inference_mode()
def _last_logits(model, seqs):
    ids, mask = _left_pad(seqs)
    return model(input_ids=ids, attention_mask=mask, logits_to_keep=1).logits[:, -1]


def run_filter(model, work: FilterWork, batch: int = 64) -> dict:
    _last_logits(model, work.docs[:batch])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(0, len(work.docs), batch):
        _last_logits(model, work.docs[i:i + batch]).float().cpu()
    seconds = time.perf_counter() - t0
    fresh = sum(len(d) for d in work.docs)
    return {"seconds": seconds, "fresh_tokens": fresh, "requested_tokens": fresh,
            "docs": len(work.docs), "batch": batch}


def run_join_plain(model, work: JoinWork, num_pairs: int, batch: int = 8) -> dict:
    """Whole prompts, no reuse, on the first `num_pairs` pairs (anchor-major order)."""
    pairs = [a + p for a in work.anchors for p in work.partners][:num_pairs]
    _last_logits(model, pairs[:batch])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(0, len(pairs), batch):
        _last_logits(model, pairs[i:i + batch]).float().cpu()
    seconds = time.perf_counter() - t0
    tokens = sum(len(s) for s in pairs)
    return {"seconds": seconds, "fresh_tokens": tokens, "requested_tokens": tokens,
            "pairs_measured": len(pairs), "batch": batch}


def _repeat_cache(cache, cfg, batch: int):
    from transformers import DynamicCache
    try:
        new = DynamicCache(config=cfg)
    except TypeError:
        new = DynamicCache()
    for i, layer in enumerate(cache.layers):
        new.update(layer.keys.expand(batch, -1, -1, -1).contiguous(),
                   layer.values.expand(batch, -1, -1, -1).contiguous(), i)
    return new


@torch.inference_mode()
def _reuse_one_anchor(model, cfg, anchor: list[int], partners: list[list[int]], batch: int):
    ids = torch.tensor([anchor], device="cuda")
    cache = model(input_ids=ids, use_cache=True, logits_to_keep=1).past_key_values
    for i in range(0, len(partners), batch):
        chunk = partners[i:i + batch]
        sids, smask = _left_pad(chunk)
        mask = torch.cat([torch.ones(len(chunk), len(anchor), dtype=torch.long, device="cuda"),
                          smask], dim=1)
        out = model(input_ids=sids, attention_mask=mask, past_key_values=_repeat_cache(
            cache, cfg, len(chunk)), use_cache=True, logits_to_keep=1)
        out.logits[:, -1].float().cpu()


def run_join_reuse(model, cfg, work: JoinWork, num_anchors: int, batch: int = 32) -> dict:
    _reuse_one_anchor(model, cfg, work.anchors[0], work.partners[:batch], batch)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for a in work.anchors[:num_anchors]:
        _reuse_one_anchor(model, cfg, a, work.partners, batch)
    seconds = time.perf_counter() - t0
    anchors = work.anchors[:num_anchors]
    p_tokens = sum(len(p) for p in work.partners)
    fresh = sum(len(a) for a in anchors) + len(anchors) * p_tokens
    requested = sum(len(a) * len(work.partners) + p_tokens for a in anchors)
    return {"seconds": seconds, "fresh_tokens": fresh, "requested_tokens": requested,
            "anchors_measured": len(anchors), "batch": batch}
