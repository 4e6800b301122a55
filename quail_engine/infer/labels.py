"""Label readouts: teacher-forced scoring for labels whose first tokens collide (each distinct
token prefix of their spellings once), and turning per-label scores into an Answer."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from quail_engine.infer.api import Answer
from quail_engine.infer.label_trie import LabelTrie, label_trie
from quail_engine.infer.readout import LabelTokens, calibrated
from quail_engine.infer.runner import Runner, SeqJob


def score_labels(runner: Runner, seqs: Sequence[tuple[Any, list[int]]],
                 label_sets: Sequence[LabelTokens], kv_tokens: int | None = None
                 ) -> list[torch.Tensor]:
    """Per sequence (prefix KV or None, own tokens): [num_labels] log-probabilities of each
    label's continuation, log-sum-exp over its spellings (bare and after a space).

    The prompt runs once with its KV kept; the label set's trie (infer/label_trie.py) then runs
    each distinct token prefix of its spellings once, chain by chain over that KV, read at every
    position. The runner normalizes over the full vocabulary on the device and returns only the
    label tokens' log-probabilities (`SeqJob.log_probs`): labels of several tokens do not copy a
    vocabulary of logits per position.
    `kv_tokens`: at most that many prompt tokens' KV kept at once, a branching chain's KV
    counted as its tokens and the prompt's again (the sequences run in groups that fit; a few
    thousand reviews in one group can fill the GPU's arena)."""
    tries: dict[int, LabelTrie] = {}
    for lt in label_sets:
        if id(lt) not in tries:
            tries[id(lt)] = label_trie(lt.spellings)
    if kv_tokens is not None:
        out: list[torch.Tensor] = []
        start = 0
        while start < len(seqs):
            end, used = start, 0
            while end < len(seqs):
                kept = _kv_kept(tries[id(label_sets[end])], len(seqs[end][1]))
                if end > start and used + kept > kv_tokens:
                    break
                used += kept
                end += 1
            out += score_labels(runner, seqs[start:end], label_sets[start:end])
            start = end
        return out
    prompts = []
    for (prefix, tokens), lt in zip(seqs, label_sets):
        firsts = tuple(sorted({sp[0] for spellings in lt.spellings for sp in spellings}))
        prompts.append(SeqJob(tokens, prefix, store_kv=True, vocab=firsts, log_probs=True))
    runner.run(prompts)
    first = [dict(zip(job.vocab, job.logits[-1].tolist())) for job in prompts]
    rows = _run_chains(runner, prompts, [tries[id(lt)] for lt in label_sets])
    out = []
    for k, lt in enumerate(label_sets):
        reads = tries[id(lt)].reads
        per_label = [_logsumexp([first[k][sp[0]] + sum(float(rows[k, c][i, col])
                                                       for c, i, col in reads[li][si])
                                 for si, sp in enumerate(spellings)])
                     for li, spellings in enumerate(lt.spellings)]
        out.append(torch.tensor(per_label, dtype=torch.float32))
    return out


def _run_chains(runner: Runner, prompts: list[SeqJob], tries: list[LabelTrie]
                ) -> dict[tuple[int, int], Any]:
    """Each prompt's trie chains, one runner call per level: (prompt, chain) -> its rows of
    log-probabilities over the trie's vocabulary (numpy, [len(chain), len(vocab)]). The
    prompts' KV and the branching chains' are dropped once their children ran."""
    rows: dict[tuple[int, int], Any] = {}
    kvs: dict[tuple[int, int], Any] = {}
    for level in range(max((t.num_levels for t in tries), default=0)):
        jobs: list[tuple[tuple[int, int], SeqJob]] = []
        for k, (prompt, trie) in enumerate(zip(prompts, tries)):
            for c in trie.level(level):
                chain = trie.chains[c]
                prefix = prompt.kv if chain.parent is None else kvs[k, chain.parent]
                jobs.append(((k, c), SeqJob(list(chain.tokens), prefix,
                                            read=tuple(range(len(chain.tokens))),
                                            vocab=trie.vocab, log_probs=True,
                                            store_kv=chain.stores_kv)))
        runner.run([job for _, job in jobs])
        if level == 0:
            for prompt in prompts:
                prompt.kv = None
        kvs = {key: job.kv for key, job in jobs if job.store_kv}
        for key, job in jobs:
            rows[key] = job.logits.numpy()
    return rows


def _kv_kept(trie: LabelTrie, prompt_tokens: int) -> int:
    """Tokens of KV label scoring keeps for one prompt of `prompt_tokens` own tokens: the
    prompt's, and per branching chain its tokens plus (at most) the prompt's again, the part of
    the prompt's last page a chain's KV copies."""
    return prompt_tokens + sum(prompt_tokens + len(c.tokens) for c in trie.chains
                               if c.stores_kv)


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


def label_answers(labels: Sequence[str], scores: torch.Tensor,
                  reference: torch.Tensor | None) -> Answer:
    """Best label after calibration; `score` is its softmax share among the labels, `margin`
    its lead over the runner-up (what the re-ask band reads: infer/reask.py)."""
    adjusted = calibrated(scores, reference)
    probs = torch.softmax(adjusted.float(), dim=-1)
    best = int(adjusted.argmax())
    margin = None
    if len(labels) > 1:
        top = torch.topk(adjusted.float(), 2).values
        margin = float(top[0] - top[1])
    return Answer(value=labels[best], score=float(probs[best]), margin=margin)
