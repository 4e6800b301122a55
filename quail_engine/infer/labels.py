"""Label readouts: teacher-forced scoring for labels whose first tokens collide, and turning
per-label scores into an Answer."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from quail_engine.infer.api import Answer
from quail_engine.infer.readout import LabelTokens, calibrated
from quail_engine.infer.runner import Runner, SeqJob


def score_labels(runner: Runner, seqs: Sequence[tuple[Any, list[int]]],
                 label_sets: Sequence[LabelTokens], kv_tokens: int | None = None
                 ) -> list[torch.Tensor]:
    """Per sequence (prefix KV or None, own tokens): [num_labels] log-probabilities of each
    label's continuation, log-sum-exp over its spellings (bare and after a space).

    The prompt runs once with its KV kept; each spelling's tokens but the last then run as a
    suffix on that KV, read at every position. The runner normalizes over the full vocabulary
    on the device and returns only the label tokens' log-probabilities (`SeqJob.log_probs`):
    labels of several tokens do not copy a vocabulary of logits per position.
    `kv_tokens`: at most that many prompt tokens' KV kept at once (the sequences run in groups
    that fit; a few thousand reviews in one group can fill the GPU's arena)."""
    if kv_tokens is not None:
        out: list[torch.Tensor] = []
        start = 0
        while start < len(seqs):
            end, used = start, 0
            while end < len(seqs) and (end == start or used + len(seqs[end][1]) <= kv_tokens):
                used += len(seqs[end][1])
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
    conts: list[tuple[int, int, int, SeqJob]] = []
    plans: dict[int, tuple[tuple[int, ...], dict[tuple[int, int], list[int]]]] = {}
    for k, (job, lt) in enumerate(zip(prompts, label_sets)):
        if id(lt) not in plans:
            plans[id(lt)] = _continuation_plan(lt)
        vocab = plans[id(lt)][0]
        for li, spellings in enumerate(lt.spellings):
            for si, sp in enumerate(spellings):
                if len(sp) > 1:
                    conts.append((k, li, si, SeqJob(list(sp[:-1]), job.kv,
                                                    read=tuple(range(len(sp) - 1)),
                                                    vocab=vocab, log_probs=True)))
    runner.run([c[-1] for c in conts])
    for job in prompts:
        job.kv = None
    rest = {}
    for k, li, si, job in conts:
        rows = job.logits.numpy()
        columns = plans[id(label_sets[k])][1][li, si]
        rest[k, li, si] = sum(float(rows[i, c]) for i, c in enumerate(columns))
    out = []
    for k, lt in enumerate(label_sets):
        per_label = [_logsumexp([first[k][sp[0]] + rest.get((k, li, si), 0.0)
                                 for si, sp in enumerate(spellings)])
                     for li, spellings in enumerate(lt.spellings)]
        out.append(torch.tensor(per_label, dtype=torch.float32))
    return out


def _continuation_plan(lt: LabelTokens):
    """(every token the label set's spellings continue with after their first, sorted: one
    vocabulary for all its continuations, so a pass of them comes back without a per-job
    column gather (a many-class label set continues with dozens of tokens); per (label,
    spelling) the columns of its continuation tokens in it)."""
    vocab = tuple(sorted({t for spellings in lt.spellings for sp in spellings for t in sp[1:]}))
    column = {t: c for c, t in enumerate(vocab)}
    return vocab, {(li, si): [column[t] for t in sp[1:]]
                   for li, spellings in enumerate(lt.spellings)
                   for si, sp in enumerate(spellings) if len(sp) > 1}


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
