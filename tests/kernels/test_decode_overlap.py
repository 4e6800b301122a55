"""The overlapped decode (infer/decode_overlap.py: each step launched from the last one's tokens
on the device, the host reading them a step late) picks the same tokens and ends the same
sequences as the step-by-step loop (infer/decode.greedy_decode), with sequences ending by EOS
while the next step already runs, by length, and admitted as the small arena frees room."""

import gc
import weakref

import pytest
import torch
from test_gpu_engine import CharTokenizer
from test_gpu_model import _models

from quail_engine.infer.decode import DecodeSeq, greedy_decode
from quail_engine.infer.decode_overlap import overlappable, overlapped_decode
from quail_engine.infer.gpu.engine import GpuEngine


def _seqs(tok, max_tokens):
    texts = [f"prompt {i}: " + "abc" * i for i in range(7)]
    return [DecodeSeq(tok.encode(t), None, max_tokens) for t in texts]


@pytest.mark.parametrize("static", [False, True])
def test_overlapped_decode_equals_step_by_step_decode(device, static):
    """`static`: the decode graphs' steps (uncaptured off CUDA), each staged while the last
    one runs (runner.decode_stage) and launched from its tokens."""
    config, _, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    runner, room = gpu.runner, gpu._decode_room()
    runner.decode_graphs = static  # (on by default on a CUDA device)
    launched = []  # per decode_next: whether its step was staged
    step = runner.decode_next
    runner.decode_next = lambda *a, staged=None: launched.append(staged is not None) or step(
        *a, staged=staged)
    assert overlappable(runner, _seqs(tok, 4))
    with torch.inference_mode():
        free = _seqs(tok, 14)
        greedy_decode(runner, free, set(), tok.decode, None, room)
        # EOS ids the answers write part way: some sequences end early, mid-flight
        eos = {free[0].out_tokens[3], free[4].out_tokens[9]}
        want, got = _seqs(tok, 14), _seqs(tok, 14)
        before = gpu.stats.decode_tokens
        greedy_decode(runner, want, eos, tok.decode, None, room)
        decoded, before = gpu.stats.decode_tokens - before, gpu.stats.decode_tokens
        overlapped_decode(runner, got, eos, tok.decode, None, room)
    # the answers' tokens fed back are the same; the steps run in vain are counted apart
    assert gpu.stats.decode_tokens - before == decoded
    assert gpu.stats.vain_decode_tokens == sum(s.finish == "eos" and len(s.out_tokens) + 1 <
                                               s.max_tokens for s in got)
    assert {s.finish for s in want} == {"eos", "length"}
    for w, g in zip(want, got):
        assert (g.out_tokens, g.text, g.finish) == (w.out_tokens, w.text, w.finish)
    # 7 answers of 14 tokens after prompts of up to 28 do not fit the 16-page arena at once
    assert gpu.decode_rows(28, 14) < 7
    del want, got, free
    gc.collect()
    gpu.prefix_cache.index.clear()
    assert fast.arena.num_free_pages == fast.arena.num_pages - static  # (the scratch page)
    # with the graphs' steps, each step's inputs were staged during the last iteration
    assert launched and all(launched) == static and any(launched) == static


@pytest.mark.parametrize("keep", [[1, 3], [0, 1, 2, 3, 4]])
def test_decode_next_keeps_the_rows_a_grammar_chooses_from(device, keep):
    """decode_next's tokens are the argmax of the step's logits, and the rows it keeps are
    those logits (decode_step's, for the same sequences at the same point): gathered, or, where
    a staged step keeps every row, the step's output itself."""
    from quail_engine.infer.runner import SeqJob

    config, _, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    runner = gpu.runner
    prompts = [tok.encode(f"prompt {i}: " + "ab" * i) for i in range(5)]
    with torch.inference_mode():
        results = []
        for step in ("decode_step", "decode_next"):
            jobs = [SeqJob(tokens=p, store_kv=True, on_device=True) for p in prompts]
            runner.run(jobs)
            kvs = [j.kv for j in jobs]
            first = torch.stack([j.logits[-1] for j in jobs]).argmax(dim=-1)
            if step == "decode_step":
                steps = [SeqJob(tokens=[int(t)], prefix=kv, store_kv=True, on_device=True)
                         for t, kv in zip(first.tolist(), kvs)]
                runner.decode_step(steps)
                results.append(torch.stack([j.logits[-1] for j in steps]))
            else:
                staged = runner.decode_stage(kvs)
                tokens, kept = runner.decode_next(kvs, first, keep=keep, staged=staged)
                results.append((tokens, kept.clone()))
            del jobs, kvs
    logits, (tokens, kept) = results
    assert tokens.tolist() == logits.argmax(dim=-1).tolist()
    assert torch.equal(kept, logits[keep])


def test_preempted_answers_in_the_paged_arena_are_the_uninterrupted_ones(device):
    """Admitted with room for two answer tokens each (the recent answers were one token long),
    answers that run to 12 tokens outgrow their reservations in the 16-page arena: the latest
    admitted are preempted (their pages back to the arena, a step in flight dropped) and
    recomputed later from prompt and answer so far. The answers are those decoded without
    preemption, and every page comes back. (The step-by-step loop's preemption:
    tests/unit/engine/test_decode.py.)"""
    loop = overlapped_decode
    from quail_engine.infer.decode import AnswerLengths

    config, _, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    runner, room = gpu.runner, gpu._decode_room()
    lengths = AnswerLengths()
    seen = _seqs(tok, 12) * 6
    for s in seen:
        s.out_tokens, s.finish = [5], "eos"
    lengths.record(seen)
    assert lengths.answer_tokens(12) == 2
    with torch.inference_mode():
        want, got = _seqs(tok, 12)[2:], _seqs(tok, 12)[2:]
        greedy_decode(runner, want, set(), tok.decode, None, room)
        before = gpu.stats.preemptions
        loop(runner, got, set(), tok.decode, None, room, lengths=lengths)
    assert gpu.stats.preemptions - before > 0
    for w, g in zip(want, got):
        assert (g.out_tokens, g.text, g.finish) == (w.out_tokens, w.text, w.finish)
    del want, got
    gc.collect()
    gpu.prefix_cache.index.clear()
    scratch = getattr(runner._graphs, "scratch", None) is not None  # (the graphs' own page)
    assert fast.arena.num_free_pages == fast.arena.num_pages - scratch


def _requests(tok, first, count, max_tokens=8):
    from quail_engine.infer.api import GenerateReadout, Request

    return [Request(tuple(tok.encode(f"row {i}: " + "xyz" * (i % 6))),
                    GenerateReadout(max_tokens=max_tokens)) for i in range(first, first + count)]


@pytest.mark.parametrize("overlap", [False, True])
def test_the_next_batchs_answers_start_as_this_ones_end(device, overlap):
    """A generating call offered the next call's requests starts their answers once its own
    are all admitted, and returns when its own are done; the next call goes on with what was
    started. Every answer is the one each batch gets alone, and every page comes back; an
    offer dropped (its call never comes) gives its pages back too."""
    config, _, fast = _models("qwen3", device)
    tok = CharTokenizer()
    gpu = GpuEngine(fast, tok, config, token_budget=64)
    gpu.runner.decode_overlap = overlap  # (False: the step-by-step loop, its KV grown in place)
    first, second = _requests(tok, 0, 7), _requests(tok, 7, 5)
    with torch.inference_mode():
        alone = gpu.run(first) + gpu.run(second)
        gpu.offer(second)
        one = gpu.run(first)
        # the second call's answers begun while the first's ended, and their KV (weakly)
        carried = [(seq, weakref.ref(state[0] if overlap else state.kv))
                   for seq, state in gpu._carry.running]
        room, kept = gpu._decode_room(), []

        def spy():  # (each admission: the carried answers ended by then hold no KV)
            kept.extend(seq for seq, kv in carried if seq.finish and kv() is not None)
            return room()

        gpu._decode_room = lambda: spy
        two = gpu.run(second)
        del gpu._decode_room
    assert carried and all(seq.finish for seq, _ in carried) and not kept
    assert [a.value for a in one + two] == [a.value for a in alone]
    assert gpu._carry is None
    with torch.inference_mode():
        gpu.offer(second)
        gpu.run(first)
    gpu.drop_carried()
    gc.collect()
    gpu.prefix_cache.index.clear()
    scratch = getattr(gpu.runner._graphs, "scratch", None) is not None
    assert fast.arena.num_free_pages == fast.arena.num_pages - scratch
