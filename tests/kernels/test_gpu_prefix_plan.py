"""Prefix attention split between a library kernel (cuDNN on the GPU; here a plain-torch
stand-in with cuDNN's output layout) and the Triton kernel: the plan covers every row once,
keeps few shapes, and the merged answers equal the all-Triton path and unshared prompts."""

import pytest
import torch
from kernel_checks import fp32_tol, rel_err
from test_gpu_model import _models, _pack

from quail_engine.infer.gpu.attention import LibPrefix, plan_prefix
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


def test_plan_covers_each_row_once_with_fixed_window_and_whole_key_grains():
    arena = PagedKVArena(1, 1, 8, 64, 16, torch.float32, "cpu")
    long, short = arena.allocate(70), arena.allocate(20)
    lib = LibPrefix(_torch_attend([]), chunk_rows=8, min_rows=6, key_grain=32)
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
    lib = LibPrefix(_torch_attend([]), chunk_rows=64, min_rows=6, key_grain=32)
    for chosen in (None, lib):  # no library; a window larger than the whole pass
        plan = plan_prefix([(p, 0, 40)], 40, 16, torch.device("cpu"), chosen)
        assert plan.lib_keys == {} and plan.lens.tolist() == [70]
    # a grain that is not a whole number of pages is rounded up to one (lcm(24, 16) = 48)
    plan = plan_prefix([(p, 0, 40)], 40, 16, torch.device("cpu"),
                       LibPrefix(lib.attend, chunk_rows=8, min_rows=6, key_grain=24))
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
                          ("split", LibPrefix(_torch_attend(calls), chunk_rows=8, min_rows=6,
                                              key_grain=16))):
            fast.lib_prefix = lib
            args = _pack(suffixes, [len(anchors[o]) for o in owner], device)
            h, _ = fast.forward(*args[:3], [stored[o] for o in owner], args[3])
            logits[name] = fast.logits(h)
        fast.lib_prefix = None
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
