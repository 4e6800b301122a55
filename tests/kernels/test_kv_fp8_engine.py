"""The fp8 KV arena in the GPU engine (PagedKVArena(kv_fp8=True)): its pages' bytes, stores and
copies keeping each token's scale, the model reading it through every attention path, and a
GpuEngine decoding over it with every page returned; the option's spelling and model id."""

import gc

import pytest
import torch
from kernel_checks import rel_err
from test_gpu_engine import CharTokenizer
from test_gpu_model import TINY, _pack

from quail_engine.errors import QuailError
from quail_engine.infer.api import GenerateReadout, Request
from quail_engine.infer.config import ModelConfig
from quail_engine.infer.gpu.attention import lib_pages
from quail_engine.infer.gpu.engine import GpuEngine, kv_fp8_requested, precision_model_id
from quail_engine.infer.gpu.model import GpuCausalLM
from quail_engine.infer.gpu.paged_kv import PagedKVArena
from quail_kernels.kv_fp8 import dequantize_kv, quantize_kv, scales_by_head, scales_by_token
from quail_testing.random_weights import random_state_dict


def _model(family, device, kv_fp8=True, num_pages=16):
    config = ModelConfig(**TINY[family])
    sd = random_state_dict(config, seed=1, std=0.2)
    arena = PagedKVArena(config.num_layers, config.num_kv_heads, config.head_dim, num_pages, 16,
                         torch.float32, device, kv_fp8=kv_fp8)
    return config, GpuCausalLM(config, sd, device=device, arena=arena, dtype=torch.float32)


def test_fp8_arena_holds_about_twice_the_pages_of_a_bf16_one():
    """Qwen3-4B's KV shape: 128 values of one byte plus a 4-byte scale per token and head, against
    256 bytes in bf16."""
    shape = (36, 8, 128)
    bf16 = PagedKVArena.for_budget(*shape, 1 << 30, 64, torch.bfloat16, "meta")
    fp8 = PagedKVArena.for_budget(*shape, 1 << 30, 64, torch.bfloat16, "meta", kv_fp8=True)
    assert bf16.page_bytes == 2 * 36 * 64 * 8 * 128 * 2
    assert fp8.page_bytes == 2 * 36 * 64 * 8 * (128 + 4)
    assert fp8.num_pages == (1 << 30) // fp8.page_bytes and fp8.num_pages > 1.9 * bf16.num_pages
    assert fp8.k.dtype == torch.float8_e4m3fn and fp8.k_scale.shape == (36, fp8.num_pages, 8, 64)


def test_fp8_arena_stores_quantized_and_copies_scales_with_values():
    """What an extension (a partial last page copied, the new tokens stored after it) and a
    copy-on-write grow move is each token's e4m3 bytes with its scale: the copies dequantize to
    the very values stored."""
    arena = PagedKVArena(2, 2, 8, 16, 8, torch.float32, "cpu", kv_fp8=True)
    g = torch.Generator().manual_seed(0)
    doc = arena.allocate(11)
    stored = {}

    def write(name, slots):
        for layer in range(2):
            n = len(slots)
            k = torch.randn(n, 2, 8, generator=g) * torch.rand(n, 2, 1, generator=g) * 9
            arena.store(layer, slots, k, -k)
            stored[name, layer] = dequantize_kv(*quantize_kv(k))

    write("doc", doc.slots())
    ((joined, stem_slots),) = arena.extend([(doc, 3)])
    write("stem", stem_slots)

    def read(p, layer, num_tokens=None):
        k, v, ks, vs = arena.layer(layer)
        flat = p.slots()[:num_tokens]
        keys, values = (dequantize_kv(x.flatten(0, 1)[flat], scales_by_token(s).flatten(0, 1)[flat])
                        for x, s in ((k, ks), (v, vs)))
        assert torch.equal(values, -keys)
        return keys

    chain = arena.chain(doc.pages, 11)
    arena.grow([chain])  # its shared partial page copied first (token 11 unwritten)
    assert chain.pages[1] != doc.pages[1]
    for layer in range(2):
        assert torch.equal(read(doc, layer), stored["doc", layer])
        assert torch.equal(read(joined, layer),
                           torch.cat([stored["doc", layer], stored["stem", layer]]))
        assert torch.equal(read(chain, layer, 11), stored["doc", layer])


def test_library_pages_of_an_fp8_arena_are_dequantized():
    k = torch.randn(4, 8, 2, 16)
    k8, ks = quantize_kv(k)
    pages = torch.tensor([2, 0])
    got = lib_pages(k8, scales_by_head(ks), pages, torch.float32)
    assert torch.equal(got, dequantize_kv(k8, ks)[pages].flatten(0, 1))
    assert torch.equal(lib_pages(k, None, pages, torch.float32), k[pages].flatten(0, 1))


@pytest.mark.parametrize("family", ["qwen3", "gemma3"])
def test_prefix_requests_over_an_fp8_arena_answer_near_flat_prompts(device, family):
    """Partners over anchors stored in an fp8 arena (the prefix kernel reading e4m3 pages, Gemma's
    sliding windows included) give the logits of the same prompts run flat, whose attention
    never reads the arena, within e4m3's rounding."""
    config, fast = _model(family, device)
    g = torch.Generator().manual_seed(4)
    anchors = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (21, 40)]
    tails = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (5, 1, 9)]
    with torch.inference_mode():
        args = _pack(anchors, [0, 0], device)
        _, stored = fast.forward(*args[:3], [None, None], args[3], [True, True])
        prefixes = [stored[0], stored[1], stored[0]]
        args = _pack(tails, [len(anchors[i]) for i in (0, 1, 0)], device)
        hidden, _ = fast.forward(*args[:3], prefixes, args[3])
        got = fast.logits(hidden)
        flat = [anchors[i] + t for i, t in zip((0, 1, 0), tails)]
        args = _pack(flat, [0] * 3, device)
        want = fast.logits(fast.forward(*args[:3], [None] * 3, args[3])[0])
    assert rel_err(got, want) < 0.05
    assert (got.argmax(-1) == want.argmax(-1)).all()
    for p in stored:
        p.release()
    assert fast.arena.num_free_pages == fast.arena.num_pages


def test_gpu_engine_decodes_over_an_fp8_arena_and_returns_every_page(device):
    """Greedy decode over e4m3 KV (each step's token stored quantized, attention over the
    prefix and itself from the arena), alone and over a shared prefix whose last page is
    partial: the texts mostly equal those of the same weights over an unquantized arena, the
    decode graphs' static step (padding rows on the scratch page) gives the eager step's texts,
    and every page comes back."""
    from quail_engine.infer.gpu.decode_graph import DecodeGraphs

    tok = CharTokenizer()
    readout = GenerateReadout(max_tokens=8)
    texts = ["continue this text:", "a", "a longer prompt that spans a page or two"]
    answers = {}
    for kv_fp8, static in ((True, False), (False, False), (True, True)):
        config, fast = _model("qwen3", device, kv_fp8=kv_fp8)
        gpu = GpuEngine(fast, tok, config, token_budget=64)
        gpu.runner.decode_graphs = static  # (on by default on a CUDA device: eager asked here)
        if static:
            gpu.runner._graphs = DecodeGraphs(fast, capture=False, buckets=(4, 8))
        with torch.inference_mode():
            handle = gpu.add_prefix(tok.encode("Instruction shared by all: "))
            answers[kv_fp8, static] = [a.value for a in gpu.run(
                [Request(tuple(tok.encode(t)), readout) for t in texts]
                + [Request(tuple(tok.encode(t)), readout, prefix=handle) for t in texts])]
            gpu.release(handle)
        gc.collect()
        gpu.prefix_cache.index.clear()
        assert fast.arena.num_free_pages == fast.arena.num_pages - static  # (scratch page)
    fp8, full = answers[True, False], answers[False, False]
    assert all(fp8) and answers[True, True] == fp8
    assert sum(a == b for a, b in zip(fp8, full)) >= len(texts), answers


def test_kv_dtype_setting_and_model_id(monkeypatch):
    monkeypatch.delenv("QUAIL_KV_DTYPE", raising=False)
    assert not kv_fp8_requested()
    monkeypatch.setenv("QUAIL_KV_DTYPE", "FP8")
    assert kv_fp8_requested()
    monkeypatch.setenv("QUAIL_KV_DTYPE", "bf16")
    assert not kv_fp8_requested()
    monkeypatch.setenv("QUAIL_KV_DTYPE", "int4")
    with pytest.raises(QuailError, match="QUAIL_KV_DTYPE"):
        kv_fp8_requested()
    # fp8 KV answers are another model's to the answer cache
    assert precision_model_id("m", False, None) == "m"
    assert precision_model_id("m", False, None, kv_fp8=True) == "m@kv-fp8"
    assert precision_model_id("m", True, None, kv_fp8=True) == "m@fp8+kv-fp8"
    assert precision_model_id("m", True, ("gate_up", "down"), True, True) == \
        "m@fp8-block[gate_up,down]+kv-fp8"
