"""GpuEngine (the Engine API on the GPU path) answers like LocalEngine on the plain-torch model:
boolean requests with and without a shared prefix, and release returns the arena's pages."""

import pytest
import torch
from kernel_checks import fp32_tol
from test_gpu_model import _models

from quail_engine.infer.api import BooleanReadout, Request
from quail_engine.infer.engine import LocalEngine
from quail_engine.infer.engine_generation import CPU_DECODE_ROWS
from quail_engine.infer.gpu.engine import WARM_UP_LENGTHS, GpuEngine


class CharTokenizer:
    """One token per character (ids 1..96); enough for the engine's text plumbing."""

    eos_token_id = 0
    bos_token_id = None

    def encode(self, text, add_special_tokens=False):
        return [1 + ord(c) % 96 for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


def test_gpu_engine_answers_like_local_engine(device):
    config, ref, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    cpu = LocalEngine(ref, tok, config, token_budget=64)
    readout = BooleanReadout(true_words=("y",), false_words=("n",))
    anchor = tok.encode("the anchor document, shared by every partner.")
    tails = [tok.encode(t) for t in (" partner one?", " two?", " a third partner, longer?")]
    answers = {}
    for name, engine in (("gpu", gpu), ("cpu", cpu)):
        handle = engine.add_prefix(anchor)
        shared = [Request(tuple(t), readout, prefix=handle) for t in tails]
        plain = [Request(tuple(t), readout) for t in tails]
        with torch.inference_mode():
            answers[name] = engine.run(shared + plain)
        engine.release(handle)
    for got, want in zip(answers["gpu"], answers["cpu"]):
        assert got.value == want.value
        assert abs(got.margin - want.margin) < max(1e-3, fp32_tol())
    # the released anchor's full pages stay cached by content until evicted
    assert fast.arena.num_free_pages + gpu.prefix_cache.index.num_pages == fast.arena.num_pages
    gpu.prefix_cache.index.clear()
    assert fast.arena.num_free_pages == fast.arena.num_pages
    assert gpu.stats.requested_tokens == cpu.stats.requested_tokens
    # on CUDA the passes' GPU time is counted (CUDA events), on the CPU there is none
    assert (gpu.stats.gpu_pass_s > 0) == (torch.device(device).type == "cuda")


def test_gpu_engine_extended_prefixes_answer_like_flat_prompts(device):
    """extend_prefixes on the paged arena (a document's whole pages shared, the tokens of its
    partial last page and the stem's copied into new pages, all documents in one copy) answers
    as the whole prompt does, and releasing both returns every page."""
    config, _, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    readout = BooleanReadout(true_words=("y",), false_words=("n",))
    page = fast.arena.page_size
    # within its first page; filling whole pages; whole pages and a partial one
    docs = [tok.encode("a carried review, mid-page."), [7] * page,
            [5] * page + tok.encode("and a partial page")]
    stem, question = tok.encode(" Question: does it"), tok.encode(" say so?")
    with torch.inference_mode():
        handles = [gpu.add_prefix(d) for d in docs]
        extended = gpu.extend_prefixes(handles, stem)
        doc, ext = (gpu.arena.get(h.id) for h in (handles[2], extended[2]))
        # the third shares its document's whole pages; its partial page and the stem are copied
        whole = len(docs[2]) // page
        assert whole >= 1 and ext.pages[:whole] == doc.pages[:whole]
        assert ext.pages[whole] != doc.pages[whole]
        for h in handles:
            gpu.release(h)
        got = gpu.run([Request(tuple(question), readout, prefix=h) for h in extended])
        want = gpu.run([Request(tuple(d + stem + question), readout) for d in docs])
    for g, w in zip(got, want):
        assert g.value == w.value and abs(g.margin - w.margin) < max(1e-3, fp32_tol())
    for h in extended:
        gpu.release(h)
    gpu.prefix_cache.index.clear()
    assert fast.arena.num_free_pages == fast.arena.num_pages


def test_partners_that_begin_alike_share_their_beginning_once(device, monkeypatch):
    """Rows over one anchor that begin alike (a join's partners) run their common beginnings
    once, as path prefixes over the anchor: the same answers as every row run whole over the
    anchor, fewer fresh tokens, and every path's page back when the call ends."""
    from quail_engine.infer import engine_sharing

    monkeypatch.setattr(engine_sharing, "MIN_PATH_SAVING", 0)
    config, _, fast = _models("qwen3", device)
    tok = CharTokenizer()
    readout = BooleanReadout(true_words=("y",), false_words=("n",))
    anchor = tok.encode("the anchor report, in which every partner is asked about.")
    partners = [" tachycardia", " tachycardia and pain", " tachypnoea", " headache",
                " headache, severe", " rash"]
    tails = [tok.encode(p + " as experienced?") for p in partners]
    runs = {}
    for paths in (False, True):
        gpu = GpuEngine(fast, tok, config, token_budget=64)
        if not paths:
            gpu._path_budget = lambda: 0
        with torch.inference_mode():
            handle = gpu.add_prefix(anchor)
            fresh0 = gpu.stats.fresh_tokens
            answers = gpu.run([Request(tuple(t), readout, prefix=handle) for t in tails])
            runs[paths] = (answers, gpu.stats.fresh_tokens - fresh0, gpu.stats.path_prefixes)
            gpu.release(handle)
        gpu.prefix_cache.index.clear()
        assert fast.arena.num_free_pages == fast.arena.num_pages
    (plain, plain_fresh, none), (shared, fresh, made) = runs[False], runs[True]
    assert none == 0 and made >= 2
    assert fresh < plain_fresh
    for got, want in zip(shared, plain):
        assert got.value == want.value
        assert abs(got.margin - want.margin) < max(1e-3, fp32_tol())


@pytest.mark.parametrize("family", ["qwen3", "gemma3"])
def test_gpu_engine_greedy_decode_matches_local_engine(device, family):
    """Decoding grows each sequence's paged KV in place, one token per step (a fresh page when
    the last is full; a copy first when the last page is a shared prefix's): the texts equal
    the plain path's for prompts of several lengths, alone and over a shared prefix whose last
    page is partial, through pages and Gemma's sliding windows, and every page comes back
    once the jobs are dropped."""
    import gc

    from quail_engine.infer.api import GenerateReadout

    config, ref, fast = _models(family, device)
    tok = CharTokenizer()
    readout = GenerateReadout(max_tokens=14)
    texts = ["continue this text:", "a", "a longer prompt that spans a page or two of the arena"]
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    cpu = LocalEngine(ref, tok, config, token_budget=64)
    got, want = {}, {}
    with torch.inference_mode():
        for engine, out in ((gpu, got), (cpu, want)):
            handle = engine.add_prefix(tok.encode("Instruction shared by all: "))
            out["plain"] = engine.run([Request(tuple(tok.encode(t)), readout) for t in texts])
            out["shared"] = engine.run([Request(tuple(tok.encode(t)), readout, prefix=handle)
                                        for t in texts])
            engine.release(handle)
    for kind in ("plain", "shared"):
        assert [a.value for a in got[kind]] == [a.value for a in want[kind]]
    page = fast.arena.page_size  # (prompt and answer cross a page boundary while decoding)
    assert any(len(t) % page + len(a.value) > page for t, a in zip(texts, got["plain"]))
    gc.collect()
    gpu.prefix_cache.index.clear()
    assert fast.arena.num_free_pages == fast.arena.num_pages - _scratch_pages(gpu)


def test_decode_steps_on_static_buffers_answer_like_eager_steps(device):
    """The decode graphs' step (decode_graph.py; its CUDA graph on a GPU, the same step on
    fixed buffers without one here) pads a step to its bucket with rows that read and write
    only a scratch page: answers equal LocalEngine's for 3 sequences (a bucket of 4) and 9 (run
    as 4 + 4 + 1, the last in a bucket of 2), the parts' logits kept apart, and every page but
    the scratch page comes back."""
    import gc

    from quail_engine.infer.api import GenerateReadout
    from quail_engine.infer.gpu.decode_graph import DecodeGraphs

    config, ref, fast = _models("qwen3", device)
    tok = CharTokenizer()
    readout = GenerateReadout(max_tokens=10)
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    gpu.runner.decode_graphs = True
    gpu.runner._graphs = DecodeGraphs(fast, capture=False, buckets=(2, 4))
    cpu = LocalEngine(ref, tok, config, token_budget=64)
    for count in (3, 9):
        requests = [Request(tuple(tok.encode(f"text {i}: " + "x" * (3 * i))), readout)
                    for i in range(count)]
        with torch.inference_mode():
            got, want = gpu.run(requests), cpu.run(requests)
        assert [a.value for a in got] == [a.value for a in want]
    assert sorted(gpu.runner._graphs.steps) == [2, 4]
    gc.collect()
    gpu.prefix_cache.index.clear()
    assert fast.arena.num_free_pages == fast.arena.num_pages - 1  # (the scratch page)


def test_gpu_engine_decodes_more_answers_than_its_arena_holds_at_once(device):
    """An arena of 16 pages of 16 tokens holds three of these answers at once: the rest
    wait and start as running ones finish (continuous batching), every answer equals the plain
    path's, and no allocation fails."""
    import gc

    from quail_engine.infer.api import GenerateReadout

    config, ref, fast = _models("qwen3", device)
    tok = CharTokenizer()
    readout = GenerateReadout(max_tokens=24)
    requests = [Request(tuple(tok.encode(f"prompt number {i}, a little long:")), readout)
                for i in range(6)]
    gpu, cpu = GpuEngine(fast, tok, config, token_budget=64), \
        LocalEngine(ref, tok, config, token_budget=64)
    # 34 + 24 tokens with slack: three of the six fit the 16 free pages at once
    assert gpu.decode_rows(34, 24) == 3 and cpu.decode_rows(34, 24) == CPU_DECODE_ROWS
    with torch.inference_mode():
        got, want = gpu.run(requests), cpu.run(requests)
    assert [a.value for a in got] == [a.value for a in want]
    gc.collect()
    assert fast.arena.num_free_pages == fast.arena.num_pages - _scratch_pages(gpu)


def test_gpu_decode_shares_prompt_beginnings_within_the_arena(device):
    """Decode prompts that begin alike (two pages here) compute that beginning once and hold
    its pages by reference while they decode, in an arena too small for all at once: the texts
    equal the plain path's, and the room admission reads never counts the cached pages the
    running sequences hold as room (evicting them frees nothing), so it never exceeds the
    pages an allocation could really get."""
    import gc

    from quail_engine.infer.api import GenerateReadout

    config, ref, fast = _models("qwen3", device)
    tok = CharTokenizer()
    page = fast.arena.page_size
    common = "a common instruction before each row:" + "." * (2 * page)
    requests = [Request(tuple(tok.encode(common[:2 * page] + f" row {i}")),
                        GenerateReadout(max_tokens=24)) for i in range(6)]
    gpu, cpu = GpuEngine(fast, tok, config, token_budget=64), \
        LocalEngine(ref, tok, config, token_budget=64, prefix_sharing=False)
    index, arena = gpu.prefix_cache.index, fast.arena
    rooms = []
    room_of = gpu._decode_room

    def checked_room():
        room = room_of()

        def call():
            tokens, size = room()
            nodes, stack = [], list(index._root.children.values())
            while stack:
                node = stack.pop()
                nodes.append(node)
                stack.extend(node.children.values())
            evictable = sum(node.refs == 0 and arena._refs[node.page] == 1 for node in nodes)
            rooms.append((tokens // size, arena.num_free_pages + evictable,
                          gpu._decode_held_pages()))
            return tokens, size
        return call

    gpu._decode_room = checked_room
    with torch.inference_mode():
        got, want = gpu.run(requests), cpu.run(requests)
    assert [a.value for a in got] == [a.value for a in want]
    assert gpu.stats.kv_hit_tokens >= len(requests) * 2 * page
    assert any(held for _, _, held in rooms)
    assert all(room <= real for room, real, _ in rooms), [r for r in rooms if r[0] > r[1]]
    assert gpu._decode_held_pages() == 0
    gc.collect()
    index.clear()
    assert arena.num_free_pages == arena.num_pages - _scratch_pages(gpu)


def _scratch_pages(gpu) -> int:
    """The page the decode graphs hold for the model's life once a graph step ran (on a CUDA
    device, by default): the rows that pad a step to its bucket write there."""
    graphs = getattr(gpu.runner, "_graphs", None)
    return int(graphs is not None and graphs.scratch is not None)


def test_gpu_engine_scores_multi_token_labels_like_local_engine(device):
    """Labels whose first tokens collide are scored teacher-forced; the GPU runner returns only
    the label tokens' log-probabilities (normalized on the device), and the choice and its
    share equal the plain path's."""
    from quail_engine.infer.api import LabelReadout

    config, ref, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    cpu = LocalEngine(ref, tok, config, token_budget=64)
    readout = LabelReadout(("heart disorder", "hepatic disorder", "hearing loss", "skin"))
    prompts = [tok.encode(t) for t in ("Text: chest pain. Class:", "Text: jaundice. Class:")]
    answers = {}
    for name, engine in (("gpu", gpu), ("cpu", cpu)):
        with torch.inference_mode():
            answers[name] = engine.run([Request(tuple(p), readout) for p in prompts])
    for got, want in zip(answers["gpu"], answers["cpu"]):
        assert got.value == want.value
        assert abs(got.score - want.score) < max(1e-3, fp32_tol())


def test_gpu_engine_logs_each_pass_shape_and_time(device):
    """Each forward pass's tokens, sequences, prefix tokens and causal attention pairs (and
    its GPU seconds on CUDA) are kept until taken: what the report's timeline lists per batch."""
    config, _, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    readout = BooleanReadout(true_words=("y",), false_words=("n",))
    anchor = tok.encode("the anchor document, shared.")
    handle = gpu.add_prefix(anchor)
    tails = [tok.encode(t) for t in (" one?", " two, longer?")]
    with torch.inference_mode():
        gpu.run([Request(tuple(t), readout, prefix=handle) for t in tails])
    passes = gpu.take_pass_log()
    assert gpu.take_pass_log() == []  # taken once
    store, asked = passes[0], passes[-1]
    n = len(anchor)
    assert store == {**store, "tokens": n, "seqs": 1, "prefix_tokens": 0,
                     "attention_pairs": n * (n + 1) // 2}
    own = [len(t) for t in tails]
    assert asked["tokens"] == sum(own) and asked["prefix_tokens"] == n * len(tails)
    assert asked["attention_pairs"] == sum(k * n + k * (k + 1) // 2 for k in own)
    assert all(("gpu_s" in p) == (torch.device(device).type == "cuda") for p in passes)
    gpu.release(handle)


def test_warm_up_leaves_no_kv_held_and_counts_no_work(device):
    """The warm-up's passes (every tile shape, output kind and prefix-segment count a query can
    launch) are nobody's work and hold no page afterwards."""
    config, _, fast = _models("qwen3", device)
    gpu = GpuEngine(fast, CharTokenizer(), config, token_budget=40)
    free = len(fast.arena._free)
    before = dict(gpu.stats.__dict__)
    passes = []
    run_pass = gpu.runner._run_pass
    gpu.runner._run_pass = lambda jobs, *a: passes.append(len(jobs)) or run_pass(jobs, *a)
    with torch.inference_mode():
        gpu.warm_up()
    assert len(fast.arena._free) == free
    assert gpu.stats.__dict__ == before
    assert len(passes) >= 2 * (1 + 3 * len(WARM_UP_LENGTHS) + 2 + 2)
    assert gpu.take_pass_log() == []  # not in the first query's timeline
