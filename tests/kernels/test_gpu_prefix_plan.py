"""Attention split between a library kernel (cuDNN on the GPU; here a plain-torch stand-in
with cuDNN's output layout) and the Triton kernels: the prefix plan covers every row once and
keeps few shapes, long sequences' own causal attention goes to the library in padded windows,
and the answers equal the all-Triton path and unshared prompts."""

import pytest
import torch
from kernel_checks import fp32_tol, rel_err
from test_gpu_model import _models, _pack

from quail_engine.infer.gpu.attention import LibAttention, plan_causal, plan_prefix
from quail_engine.infer.gpu.paged_kv import PagedKVArena


def _torch_attend(calls):
    def attend(q, k, v, scale):
        calls.append((q.shape[0], k.shape[0]))
        group = q.shape[1] // k.shape[1]
        kk, vv = (x.repeat_interleave(group, 1).float() for x in (k, v))
        s = torch.einsum("nhd,lhd->hnl", q.float(), kk) * scale
        o = torch.einsum("hnl,lhd->hnd", torch.softmax(s, -1), vv)
        return o.to(q.dtype).transpose(0, 1), torch.logsumexp(s, -1).t()  # strided, like cuDNN
    return attend


def _torch_causal(calls):
    def causal(q, k, v, scale):
        calls.append(q.shape[0])
        assert q.shape[0] == k.shape[0] == v.shape[0]
        group = q.shape[1] // k.shape[1]
        kk, vv = (x.repeat_interleave(group, 1).float() for x in (k, v))
        s = torch.einsum("nhd,lhd->hnl", q.float(), kk) * scale
        n = q.shape[0]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1).to(s.device), float("-inf"))
        o = torch.einsum("hnl,lhd->hnd", torch.softmax(s, -1), vv)
        return o.to(q.dtype).transpose(0, 1), torch.logsumexp(s, -1).t()
    return causal


def test_plan_covers_each_row_once_with_fixed_window_and_whole_key_grains():
    arena = PagedKVArena(1, 1, 8, 64, 16, torch.float32, "cpu")
    long, short = arena.allocate(70), arena.allocate(20)
    lib = LibAttention(_torch_attend([]), chunk_rows=8, min_rows=6, key_grain=32)
    segs = [(None, 0, 3), (long, 3, 22), (short, 22, 30), (long, 30, 34)]
    plan = plan_prefix(segs, 34, 16, torch.device("cpu"), lib)
    covered = [r for r0, r1, _ in plan.runs for r in range(r0, r1)]
    assert covered == list(range(34))
    chunks = [c for _, _, c in plan.runs if c is not None]
    assert {c.seg for c in chunks} == {1}  # only the long segment with >= 6 rows
    assert all(0 <= c.window <= 34 - 8 and c.window <= c.r0 and c.r1 <= c.window + 8
               for c in chunks)
    assert plan.lib_keys == {1: 64}  # 70 keys: 64 to the library, a tail of 6 to Triton
    assert plan.lens.tolist() == [0, 6, 20, 70]
    assert plan.table[1, 0] == long.pages[4]  # tail row starts past the 64 library keys
    assert plan.lib_pages[1].tolist() == long.pages[:4]


def test_plan_without_library_or_room_keeps_everything_on_triton_and_grains_are_whole_pages():
    arena = PagedKVArena(1, 1, 8, 64, 16, torch.float32, "cpu")
    p = arena.allocate(70)
    lib = LibAttention(_torch_attend([]), chunk_rows=64, min_rows=6, key_grain=32)
    for chosen in (None, lib):  # no library; a window larger than the whole pass
        plan = plan_prefix([(p, 0, 40)], 40, 16, torch.device("cpu"), chosen)
        assert plan.lib_keys == {} and plan.lens.tolist() == [70]
    # a grain that is not a whole number of pages is rounded up to one (lcm(24, 16) = 48)
    plan = plan_prefix([(p, 0, 40)], 40, 16, torch.device("cpu"),
                       LibAttention(lib.attend, chunk_rows=8, min_rows=6, key_grain=24))
    assert plan.lib_keys == {0: 48} and plan.lens.tolist() == [22]


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_library_prefix_split_answers_like_triton_and_unshared(device, family):
    config, _, fast = _models(family, device)
    g = torch.Generator().manual_seed(5)
    anchors = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (37, 16)]
    calls = []
    suffixes = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (5, 4, 12, 3, 8, 2)]
    owner = [0, 1, 0, 1, 0, 0]
    logits = {}
    with torch.inference_mode():
        args = _pack(anchors, [0, 0], device)
        _, stored = fast.forward(*args[:3], [None, None], args[3], [True, True])
        for name, lib in (("triton", None),
                          ("split", LibAttention(_torch_attend(calls), chunk_rows=8, min_rows=6,
                                              key_grain=16))):
            fast.lib_attention = lib
            args = _pack(suffixes, [len(anchors[o]) for o in owner], device)
            h, _ = fast.forward(*args[:3], [stored[o] for o in owner], args[3])
            logits[name] = fast.logits(h)
        fast.lib_attention = None
        full = [anchors[o] + s for o, s in zip(owner, suffixes)]
        args = _pack(full, [0] * len(full), device)
        h_full, _ = fast.forward(*args[:3], [None] * len(full), args[3])
    # anchor 0 (37 keys: 32 to the library, 5 to Triton) has 30 suffix rows -> 4 windows of 8
    # per layer; anchor 1 has 7 rows and 16 keys -> one window per layer
    assert sorted(set(calls)) == [(8, 16), (8, 32)]
    assert len(calls) == config.num_layers * 5
    assert rel_err(logits["split"], logits["triton"]) < fp32_tol()
    assert rel_err(logits["split"], fast.logits(h_full)) < fp32_tol()
    for entry in stored:
        entry.release()


def test_causal_plan_sends_long_sequences_in_few_padded_shapes():
    lib = LibAttention(_torch_attend([]), causal=_torch_causal([]), causal_min=2048)
    assert plan_causal([100, 900], torch.device("cpu"), lib) is None
    assert plan_causal([5000], torch.device("cpu"), LibAttention(lib.attend)) is None
    assert plan_causal([100, 2047], torch.device("cpu"), lib) is None  # one Triton launch
    plan = plan_causal([100, 5000, 30, 24000], torch.device("cpu"), lib)
    assert plan.lib == [(100, 5000), (5130, 24000)]
    assert [(s.tolist(), n) for s, n in plan.groups] == [([0, 2], 100)]
    # rows rounded up to a 32nd of the power of two, never below the grain: <= 16 shapes per
    # doubling of length, and less than 1/16 extra rows
    assert [lib.causal_rows(n) for n in (2048, 2049, 5000, 8192, 8193, 24000)] == \
        [2048, 2176, 5120, 8192, 8704, 24576]
    lengths = range(2049, 32769)
    assert len({lib.causal_rows(n) for n in lengths}) <= 4 * 16
    assert max(lib.causal_rows(n) / n for n in lengths) < 1 + 1 / 16


def test_causal_plan_groups_short_and_long_sequences_for_triton():
    """Sequences below the split and those at or above it get separate Triton launches (each
    with its own longest's tiles) when the short ones hold most tokens (a filter's reviews with
    one long one), one launch otherwise (a few long next to a few short: two launches would
    each fill the GPU less); one length class alone needs no plan; the library's sequences are
    in no group."""
    cpu = torch.device("cpu")
    assert plan_causal([300, 280, 900], cpu, None) is None
    assert plan_causal([1100, 1500], cpu, None) is None
    plan = plan_causal([300] * 10 + [1200, 0] + [280] * 10, cpu, None)
    assert plan.lib == []
    assert [(s.tolist(), n) for s, n in plan.groups] == [
        ([10], 1200), ([*range(10), *range(12, 22)], 300)]
    assert plan_causal([400] * 5 + [1200] * 2, cpu, None) is None  # 45% short: one launch
    assert plan_causal([300] * 10 + [1200], cpu, None, split_at=0) is None
    lib = LibAttention(_torch_attend([]), causal=_torch_causal([]), causal_min=2048)
    plan = plan_causal([300, 1200, 3000], cpu, lib)
    assert plan.lib == [(1500, 3000)]
    assert [(s.tolist(), n) for s, n in plan.groups] == [([0, 1], 1200)]
    plan = plan_causal([300] * 20 + [1200, 3000], cpu, lib)
    assert plan.lib == [(7200, 3000)]
    assert [(s.tolist(), n) for s, n in plan.groups] == [([20], 1200), ([*range(20)], 300)]


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_long_sequences_through_library_causal_answer_like_triton(device, family):
    """Own attention of sequences >= causal_min in the library (one padded window each, the
    last one past the pass's end: zero rows), alone and next to a shared prefix's suffixes."""
    config, _, fast = _models(family, device)
    g = torch.Generator().manual_seed(7)
    seqs = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (9, 40, 3, 29)]
    calls = []
    lib = LibAttention(_torch_attend([]), chunk_rows=1 << 20, causal=_torch_causal(calls),
                       causal_min=20, causal_grain=16)
    anchor = torch.randint(0, 97, (21,), generator=g).tolist()
    with torch.inference_mode():
        args = _pack([anchor], [0], device)
        _, stored = fast.forward(*args[:3], [None], args[3], [True])
        logits = {}
        for name, chosen in (("triton", None), ("library", lib)):
            fast.lib_attention = chosen
            args = _pack(seqs, [0] * len(seqs), device)
            h, _ = fast.forward(*args[:3], [None] * len(seqs), args[3])
            prefixed = [stored[0], None, None, stored[0]]
            args = _pack(seqs, [21 if p else 0 for p in prefixed], device)
            hp, _ = fast.forward(*args[:3], prefixed, args[3])
            logits[name] = (fast.logits(h), fast.logits(hp))
        fast.lib_attention = None
    # 40 and 29 tokens -> windows of 48 and 32 rows (grain 16), per layer, in both passes
    assert sorted(set(calls)) == [32, 48] and len(calls) == 2 * 2 * config.num_layers
    for ours, theirs in zip(logits["library"], logits["triton"]):
        assert rel_err(ours, theirs) < fp32_tol()
    stored[0].release()


def test_length_groups_answer_like_one_launch(device, monkeypatch):
    """A pass whose sequences straddle the length split runs two Triton launches (plain and
    over a shared prefix) and answers as one launch over all."""
    from quail_engine.infer.gpu import attention

    config, _, fast = _models("qwen3", device)
    g = torch.Generator().manual_seed(5)
    seqs = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (9, 40, 3, 29)]
    anchor = torch.randint(0, 97, (17,), generator=g).tolist()
    logits = {}
    with torch.inference_mode():
        args = _pack([anchor], [0], device)
        _, stored = fast.forward(*args[:3], [None], args[3], [True])
        for split in (0, 10):
            monkeypatch.setattr(attention, "SHORT_SPLIT", split)
            monkeypatch.setattr(attention, "SHORT_SHARE", 0.0)
            args = _pack(seqs, [0] * len(seqs), device)
            h, _ = fast.forward(*args[:3], [None] * len(seqs), args[3])
            prefixed = [stored[0], None, stored[0], None]
            args = _pack(seqs, [17 if p else 0 for p in prefixed], device)
            hp, _ = fast.forward(*args[:3], prefixed, args[3])
            logits[split] = (fast.logits(h), fast.logits(hp))
    lengths = [len(s) for s in seqs]
    assert attention.plan_causal(lengths, torch.device("cpu"), None) is not None
    for ours, theirs in zip(logits[10], logits[0]):
        assert rel_err(ours, theirs) < fp32_tol()
    stored[0].release()
