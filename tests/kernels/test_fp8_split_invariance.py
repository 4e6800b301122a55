"""On the GPU path in fp8, a prompt answers the same whether its document was stored as a prefix
first (a join's anchor, a document asked several questions) or the whole prompt ran in one pass:
each row's fp8 scale reads no row after it (varlen_attention.causal_amax), so the document's
rows, and with them its keys and values, are the same either way. (With the whole sequence's
max |v| as the bound, as before 4e879ae, these margins differed by up to 0.21.) The model
runs in float16: Triton's interpreter computes bfloat16 attention tiles wrongly."""

import random

import torch
from test_gpu_engine import CharTokenizer
from test_gpu_model import TINY

from quail_engine.infer.api import BooleanReadout, Request
from quail_engine.infer.config import ModelConfig
from quail_engine.infer.gpu.engine import GpuEngine
from quail_engine.infer.gpu.model import GpuCausalLM
from quail_engine.infer.gpu.paged_kv import PagedKVArena
from quail_testing.random_weights import random_state_dict


def _fp8_engine(device):
    config = ModelConfig(**TINY["qwen3"])
    sd = random_state_dict(config, seed=3, std=0.2)
    arena = PagedKVArena(config.num_layers, config.num_kv_heads, config.head_dim, 16, 32,
                         torch.float16, device)
    model = GpuCausalLM(config, sd, fp8=True, device=device, arena=arena,
                        dtype=torch.float16)
    return GpuEngine(model, CharTokenizer(), config, token_budget=256)


def test_a_document_stored_first_answers_as_the_whole_prompt(device):
    whole_engine, split_engine = _fp8_engine(device), _fp8_engine(device)
    whole_engine.prefix_cache = None  # each prompt computed whole, in one pass
    readout = BooleanReadout(true_words=("y",), false_words=("n",))
    rng = random.Random(1)
    docs = [[rng.randrange(1, 97) for _ in range(rng.randint(10, 60))] for _ in range(3)]
    questions = [[rng.randrange(1, 97) for _ in range(rng.randint(3, 20))] for _ in range(3)]
    with torch.inference_mode():
        whole = whole_engine.run([Request(tuple(d + q), readout) for d in docs
                                  for q in questions])
        handles = [split_engine.add_prefix(d) for d in docs]
        split = split_engine.run([Request(tuple(q), readout, prefix=h)
                                  for h in handles for q in questions])
        for h in handles:
            split_engine.release(h)
    worst = max(abs(a.margin - b.margin) for a, b in zip(whole, split))
    assert worst < 1e-3, f"margins moved by up to {worst:.4f} between the two routes"
    assert [a.value for a in whole] == [b.value for b in split]


def test_partners_over_shared_paths_answer_as_each_run_whole_over_the_anchor(device,
                                                                            monkeypatch):
    """A join's partners that begin alike, their common beginnings computed once as path
    prefixes over the anchor (engine_sharing._shared_paths), answer in fp8 as each partner
    run whole over the anchor."""
    from quail_engine.infer import engine_sharing

    monkeypatch.setattr(engine_sharing, "MIN_PATH_SAVING", 0)
    readout = BooleanReadout(true_words=("y",), false_words=("n",))
    rng = random.Random(2)
    anchor = [rng.randrange(1, 97) for _ in range(40)]
    stems = [[rng.randrange(1, 97) for _ in range(6)] for _ in range(2)]
    partners = [stem + [rng.randrange(1, 97) for _ in range(rng.randint(1, 5))]
                for stem in stems for _ in range(3)]
    runs = []
    for paths in (False, True):
        engine = _fp8_engine(device)
        if not paths:
            engine._path_budget = lambda: 0
        with torch.inference_mode():
            handle = engine.add_prefix(anchor)
            runs.append(engine.run([Request(tuple(p), readout, prefix=handle)
                                    for p in partners]))
            engine.release(handle)
        assert engine.stats.path_prefixes == (2 if paths else 0)
    worst = max(abs(a.margin - b.margin) for a, b in zip(*runs))
    assert worst < 1e-3, f"margins moved by up to {worst:.4f} with the paths"


def test_a_decoded_token_rounds_as_the_same_token_in_a_prefill(device):
    """A decode step's token (its K/V stored at the end of its prefix, attention over all of
    them) and the same token as the last row of a prefill of the whole sequence take the same
    fp8 scale: the max |v| over every key it sees (taken inside the decode's prefix attention),
    so an answer recomputed by prefill after a preemption continues as its decode would. (With
    each decoded row's own max, as before, the hidden states differed by 0.16 relative.)"""
    engine = _fp8_engine(device)
    model = engine.model
    rng = random.Random(3)
    seqs = [[rng.randrange(1, 97) for _ in range(n)] for n in (23, 41, 9)]
    last = torch.tensor([len(s) - 1 for s in seqs])

    def packed(token_lists):
        cu = [0]
        for t in token_lists:
            cu.append(cu[-1] + len(t))
        ids = torch.tensor([x for t in token_lists for x in t], device=device)
        pos = torch.cat([torch.arange(len(t)) for t in token_lists]).to(device)
        return ids, pos, torch.tensor(cu, dtype=torch.int32, device=device), \
            torch.tensor(cu[1:], device=device) - 1

    with torch.inference_mode():
        ids, pos, cu, reads = packed([s[:-1] for s in seqs])
        _, stored = model.forward(ids, pos, cu, [None] * len(seqs), reads, [True] * len(seqs))
        stepped = model.decode([s[-1] for s in seqs], stored)
        ids, pos, cu, reads = packed(seqs)
        whole, _ = model.forward(ids, pos, cu, [None] * len(seqs), reads)
        for p in stored:
            p.release()
    assert last.numel() == stepped.shape[0] == whole.shape[0]
    worst = ((stepped.float() - whole.float()).abs().max() / whole.float().abs().max()).item()
    assert worst < 2e-3, f"the decoded rows differ from the prefilled ones by {worst:.4f}"
