"""Label scoring through the label trie answers as scoring each spelling on its own did (the
reference below is that code), in float32 on the CPU: on a tiny random model and on the
embedded model, with labels that share first tokens and labels that continue one another; and
it runs fewer tokens when spellings share a prefix."""

from __future__ import annotations

import math

import pytest
import torch

from quail_engine.infer.api import EngineStats
from quail_engine.infer.config import ModelConfig
from quail_engine.infer.label_trie import label_trie
from quail_engine.infer.labels import label_answers, score_labels
from quail_engine.infer.models import build_model
from quail_engine.infer.readout import LabelTokens, label_tokens
from quail_engine.infer.runner import Runner, SeqJob
from quail_engine.infer.scheduler import Scheduler
from quail_testing.quailb.prompts import BIO_ORGAN_CLASS_LABELS, IMDB_COMPLAINT_LABELS
from quail_testing.random_weights import random_state_dict


def per_spelling_reference(runner, seqs, label_sets):
    """Label scoring before the trie: each spelling's tokens but its last run over the prompt's
    KV as a job of its own."""
    prompts = []
    for (prefix, tokens), lt in zip(seqs, label_sets):
        firsts = tuple(sorted({sp[0] for sps in lt.spellings for sp in sps}))
        prompts.append(SeqJob(tokens, prefix, store_kv=True, vocab=firsts, log_probs=True))
    runner.run(prompts)
    first = [dict(zip(job.vocab, job.logits[-1].tolist())) for job in prompts]
    conts = []
    for k, (job, lt) in enumerate(zip(prompts, label_sets)):
        vocab = tuple(sorted({t for sps in lt.spellings for sp in sps for t in sp[1:]}))
        for li, sps in enumerate(lt.spellings):
            for si, sp in enumerate(sps):
                if len(sp) > 1:
                    conts.append((k, li, si, [vocab.index(t) for t in sp[1:]],
                                  SeqJob(list(sp[:-1]), job.kv, read=tuple(range(len(sp) - 1)),
                                         vocab=vocab, log_probs=True)))
    runner.run([c[-1] for c in conts])
    rest = {(k, li, si): sum(float(job.logits.numpy()[i, c]) for i, c in enumerate(columns))
            for k, li, si, columns, job in conts}
    out = []
    for k, lt in enumerate(label_sets):
        scores = []
        for li, sps in enumerate(lt.spellings):
            values = [first[k][sp[0]] + rest.get((k, li, si), 0.0) for si, sp in enumerate(sps)]
            top = max(values)
            scores.append(top + math.log(sum(math.exp(v - top) for v in values)))
        out.append(torch.tensor(scores, dtype=torch.float32))
    return out


def spelled(labels_and_spellings) -> LabelTokens:
    labels = tuple(f"label {i}" for i in range(len(labels_and_spellings)))
    spellings = tuple(tuple(tuple(sp) for sp in sps) for sps in labels_and_spellings)
    return LabelTokens(labels, tuple(tuple({sp[0] for sp in sps}) for sps in spellings),
                       spellings)


def fresh(runner, fn, *args, **kwargs):
    before = runner.stats.fresh_tokens
    out = fn(runner, *args, **kwargs)
    return out, runner.stats.fresh_tokens - before


def assert_same_answers(ours, reference, label_sets, exact):
    for got, want, lt in zip(ours, reference, label_sets, strict=True):
        if exact:
            assert torch.equal(got, want)
        else:
            # the same log-probabilities summed in another order and another batch layout (the
            # CPU's matmul blocking differs by instruction set: AVX-512 against AMX): equal to
            # float32 rounding relative to the scores' size (~30 nats)
            torch.testing.assert_close(got, want, rtol=4e-6, atol=2e-5)
        ours_answer, answer = (label_answers(lt.labels, s, None) for s in (got, want))
        assert ours_answer.value == answer.value
        assert ours_answer.margin == pytest.approx(answer.margin, abs=2e-4)


@pytest.fixture(scope="module")
def tiny_runner():
    config = ModelConfig(family="qwen3", vocab_size=97, hidden_size=64, num_layers=2,
                         num_heads=4, num_kv_heads=2, head_dim=16, intermediate_size=96,
                         qk_norm=True, tie_word_embeddings=True, rope_theta=1e6,
                         max_position=4096)
    model = build_model(config)
    model.load_state_dict(random_state_dict(config, seed=5, std=0.3), strict=False)
    return Runner(model.float().eval(), Scheduler(token_budget=96, max_seqs=16), EngineStats())


SHARED_FIRSTS = [[(5, 6, 7), (50, 6, 7)], [(5, 8), (50, 8)], [(5, 9, 10, 11), (50, 9, 12)]]
PREFIXES = [[(20,), (21,)], [(20, 22), (21, 22)], [(20, 22, 23, 24), (21, 22, 23)],
            [(30, 31)]]
DISJOINT = [[(40, 41, 42)], [(43, 44)], [(45,)]]


@pytest.mark.parametrize("sets, exact", [
    ([DISJOINT], True),            # nothing shared: the very jobs of before
    ([SHARED_FIRSTS], False),      # "poor acting" / "poor writing": continued over "poor"'s KV
    ([PREFIXES], False),           # "sports" / "sports news": one chain reads both
    ([SHARED_FIRSTS, PREFIXES, DISJOINT], False),  # a batch mixing label sets
])
def test_trie_scores_equal_per_spelling_scores_on_a_random_model(tiny_runner, sets, exact):
    g = torch.Generator().manual_seed(len(sets))
    prompts = [torch.randint(1, 97, (n,), generator=g).tolist() for n in (7, 30, 1, 55, 12)]
    label_sets = [spelled(sets[i % len(sets)]) for i in range(len(prompts))]
    seqs = [(None, p) for p in prompts]
    want, old = fresh(tiny_runner, per_spelling_reference, seqs, label_sets)
    got, new = fresh(tiny_runner, score_labels, seqs, label_sets)
    assert_same_answers(got, want, label_sets, exact)
    trie_tokens = sum(label_trie(lt.spellings).num_tokens for lt in label_sets)
    assert new == sum(map(len, prompts)) + trie_tokens
    assert new < old or exact and new == old
    # groups that keep at most 40 prompt tokens' KV at once answer alike (other passes: a
    # float32 rounding apart)
    grouped, _ = fresh(tiny_runner, score_labels, seqs, label_sets, kv_tokens=40)
    assert_same_answers(grouped, got, label_sets, exact=False)


def test_over_a_document_prefix(tiny_runner):
    """Prompts continuing a resident prefix (a document's KV): the chains' KV extends it."""
    doc = SeqJob(list(range(3, 40)), store_kv=True, read=())
    tiny_runner.run([doc])
    label_sets = [spelled(SHARED_FIRSTS), spelled(PREFIXES)]
    seqs = [(doc.kv, [60, 61, 62]), (doc.kv, [63])]
    want = per_spelling_reference(tiny_runner, seqs, label_sets)
    assert_same_answers(score_labels(tiny_runner, seqs, label_sets), want, label_sets, False)


EMBEDDED_LABELS = {
    "organ classes": BIO_ORGAN_CLASS_LABELS,   # 26 labels, no first token shared
    "complaints": IMDB_COMPLAINT_LABELS,       # "poor ..." x3, "too ..." x2
    "prefixes": ("cardiac", "cardiac disorders", "cardiac disorders of the valves",
                 "vascular disorders"),
}


@pytest.fixture(scope="module", params=["gemma3-270m", "smollm2-135m"])
def embedded(request, require_embedded):
    from quail_engine.infer.engine import LocalEngine

    require_embedded(request.param)
    return LocalEngine.load(request.param, "cpu", "float32", token_budget=512)


@pytest.mark.parametrize("name", sorted(EMBEDDED_LABELS))
def test_trie_scores_equal_per_spelling_scores_on_the_embedded_model(embedded, name):
    encode = embedded.codec.encode
    lt = label_tokens(encode, EMBEDDED_LABELS[name])
    texts = ["headache and nausea after the second dose", "The acting was wooden.",
             "atrial fibrillation"]
    seqs = [(None, encode(f"DOCUMENT:\n{t}\n\nWhich category fits it?\nANSWER:"))
            for t in texts]
    want, old = fresh(embedded.runner, per_spelling_reference, seqs, [lt] * len(seqs))
    got, new = fresh(embedded.runner, score_labels, seqs, [lt] * len(seqs))
    trie = label_trie(lt.spellings)
    shared = trie.num_tokens < sum(len(sp) - 1 for sps in lt.spellings for sp in sps)
    assert_same_answers(got, want, [lt] * len(seqs), exact=not shared)
    assert new - sum(len(s[1]) for s in seqs) == len(seqs) * trie.num_tokens
    assert new < old if shared else new == old
