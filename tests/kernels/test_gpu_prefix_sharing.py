"""Prefix sharing on the GPU path (paged arena, Triton kernels; on the CPU under
TRITON_INTERPRET=1): rows that begin alike read a chain of shared arena pages and answer like
the plain-torch engine without sharing; a full arena evicts cached pages, never pinned ones."""

import torch
from kernel_checks import fp32_tol
from test_gpu_engine import CharTokenizer
from test_gpu_model import _models

from quail_engine.infer.api import BooleanReadout, Request
from quail_engine.infer.engine import LocalEngine
from quail_engine.infer.gpu.engine import GpuEngine

READOUT = BooleanReadout(true_words=("y",), false_words=("n",))


def _snapshots(tok):
    """Cumulative snapshots of one trace (each the previous plus a turn), then a question."""
    turns = ["plan: read the file, run it;", " ran a test;", " patched it."]
    return [tok.encode("".join(turns[:k]) + " fixed?") for k in range(1, len(turns) + 1)]


def test_shared_rows_answer_like_the_unshared_plain_engine(device):
    config, ref, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64, prefix_sharing=True)
    cpu = LocalEngine(ref, tok, config, token_budget=64, prefix_sharing=False)
    requests = [Request(tuple(t), READOUT) for t in _snapshots(tok)]
    with torch.inference_mode():
        got, want = gpu.run(requests), cpu.run(requests)
        handle = gpu.add_prefix(_snapshots(tok)[-1][:-7])  # a chain of cached pages + its own
        plain = cpu.add_prefix(_snapshots(tok)[-1][:-7])
        partners = [Request(tuple(tok.encode(" done?")), READOUT, handle)]
        got += gpu.run(partners)
        want += cpu.run([Request(r.tokens, READOUT, plain) for r in partners])
    for g, w in zip(got, want):
        assert g.value == w.value
        assert abs(g.margin - w.margin) < max(1e-3, fp32_tol())
    assert gpu.stats.kv_hit_tokens >= 3 * 16
    assert gpu.stats.fresh_tokens < cpu.stats.fresh_tokens
    # the handle pins its pages: evicting everything evicts only the unpinned cached ones
    doc = list(_snapshots(tok)[-1][:-7])
    pinned = len(gpu.prefix_cache.index.match(doc))
    gpu.prefix_cache.index.evict(fast.arena.num_pages)
    assert len(gpu.prefix_cache.index.match(doc)) == pinned > 0
    gpu.release(handle)
    gpu.prefix_cache.index.clear()
    assert fast.arena.num_free_pages == fast.arena.num_pages


def test_a_batch_holding_more_kv_than_the_arena_runs_with_sharing(device):
    """A batch of rows whose KV together exceeds the arena (16 pages of 16 tokens) runs with
    sharing on instead of failing with 'KV arena full' (an fp8 filter batch on the H200 did:
    every row's KV was kept until the run ended), and answers like the plain engine."""
    config, ref, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64, prefix_sharing=True)
    cpu = LocalEngine(ref, tok, config, token_budget=64, prefix_sharing=False)
    docs = [f"row {i}: the report names reaction {i * 7} and dose {i * 13} mg?" for i in
            range(12)]
    requests = [Request(tuple(tok.encode(d)), READOUT) for d in docs]
    assert sum(len(r.tokens) for r in requests) > fast.arena.num_pages * fast.arena.page_size
    with torch.inference_mode():
        got, want = gpu.run(requests), cpu.run(requests)
    for g, w in zip(got, want):
        assert g.value == w.value
        assert abs(g.margin - w.margin) < max(1e-3, fp32_tol())
    # the rows share nothing: only the last row's KV stays cached, for the next batch
    last = requests[-1].tokens
    assert gpu.prefix_cache.index.num_pages == len(last) // fast.arena.page_size
    assert len(gpu.prefix_cache.index.match(last)) == len(last) // fast.arena.page_size
    gpu.prefix_cache.index.clear()
    assert fast.arena.num_free_pages == fast.arena.num_pages


def test_shared_beginnings_larger_than_the_arena_run_in_runs_that_fit(device):
    """Six pairs of rows, each pair sharing a 48-token beginning: the beginnings alone (18 pages
    of 16 tokens) exceed the arena (16 pages), so warming them all at once failed with 'KV
    arena full'; the batch now runs as runs whose distinct tokens fit, still sharing each
    pair's beginning, and answers like the plain engine."""
    config, ref, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64, prefix_sharing=True)
    cpu = LocalEngine(ref, tok, config, token_budget=64, prefix_sharing=False)
    beginnings = [f"[{g}] " + "".join(chr(97 + (g * 7 + i * 3) % 26) for i in range(44))
                  for g in range(6)]
    requests = [Request(tuple(tok.encode(b + end)), READOUT)
                for b in beginnings for end in (" ok?", " no?")]
    assert 6 * (48 // 16) > fast.arena.num_pages
    with torch.inference_mode():
        got, want = gpu.run(requests), cpu.run(requests)
    for g, w in zip(got, want):
        assert g.value == w.value
        assert abs(g.margin - w.margin) < max(1e-3, fp32_tol())
    assert gpu.stats.kv_hit_tokens >= 6 * 48  # each pair's second row read the beginning
    assert gpu.stats.fresh_tokens < cpu.stats.fresh_tokens
    gpu.prefix_cache.index.clear()
    assert fast.arena.num_free_pages == fast.arena.num_pages
