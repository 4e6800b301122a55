"""The overlapped decode (infer/decode_overlap.py: each step launched from the last one's tokens
on the device, the host reading them a step late) picks the same tokens and ends the same
sequences as the step-by-step loop (infer/decode.greedy_decode), with sequences ending by EOS
while the next step already runs, by length, and admitted as the small arena frees room."""

import gc

import torch
from test_gpu_engine import CharTokenizer
from test_gpu_model import _models

from quail_engine.infer.decode import DecodeSeq, greedy_decode
from quail_engine.infer.decode_overlap import overlappable, overlapped_decode
from quail_engine.infer.gpu.engine import GpuEngine


def _seqs(tok, max_tokens):
    texts = [f"prompt {i}: " + "abc" * i for i in range(7)]
    return [DecodeSeq(tok.encode(t), None, max_tokens) for t in texts]


def test_overlapped_decode_equals_step_by_step_decode(device):
    config, _, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    runner, room = gpu.runner, gpu._decode_room()
    assert overlappable(runner, _seqs(tok, 4))
    with torch.inference_mode():
        free = _seqs(tok, 20)
        greedy_decode(runner, free, set(), tok.decode, None, room)
        # EOS ids the answers write part way: some sequences end early, mid-flight
        eos = {free[0].out_tokens[3], free[4].out_tokens[9]}
        want, got = _seqs(tok, 20), _seqs(tok, 20)
        greedy_decode(runner, want, eos, tok.decode, None, room)
        overlapped_decode(runner, got, eos, tok.decode, room)
    assert {s.finish for s in want} == {"eos", "length"}
    for w, g in zip(want, got):
        assert (g.out_tokens, g.text, g.finish) == (w.out_tokens, w.text, w.finish)
    # 7 answers of 20 tokens after prompts of up to 28 do not fit the 16-page arena at once
    assert gpu.decode_rows(28, 20) < 7
    del want, got, free
    gc.collect()
    gpu.prefix_cache.index.clear()
    assert fast.arena.num_free_pages == fast.arena.num_pages


def test_a_sequence_that_needs_its_tokens_on_the_host_is_not_overlapped(device):
    config, _, fast = _models("qwen3", device)
    tok = CharTokenizer()
    runner = GpuEngine(fast, tok, config, token_budget=64).runner
    plain = _seqs(tok, 4)
    assert overlappable(runner, plain)
    for change in ({"stop": ("x",)}, {"repetition_penalty": 1.2}, {"grammar": object()}):
        seqs = _seqs(tok, 4)
        for key, value in change.items():
            setattr(seqs[2], key, value)
        assert not overlappable(runner, seqs)
    runner.decode_overlap = False
    assert not overlappable(runner, plain)
