"""Label readouts: teacher-forced scoring for labels whose first tokens collide, and turning
per-label scores into an Answer."""

from __future__ import annotations

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
    26 labels of up to 11 tokens no longer copy a vocabulary of logits per position.
    `kv_tokens`: at most that many prompt tokens' KV kept at once (the sequences run in groups
    that fit; QUAIL-B IMDB-14's 2,900 reviews filled the H200's arena in one)."""
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
    first = [dict(zip(job.vocab, job.logits[-1])) for job in prompts]
    conts: list[tuple[int, int, int, SeqJob]] = []
    for k, (job, lt) in enumerate(zip(prompts, label_sets)):
        for li, spellings in enumerate(lt.spellings):
            for si, sp in enumerate(spellings):
                if len(sp) > 1:
                    conts.append((k, li, si, SeqJob(list(sp[:-1]), job.kv,
                                                    read=tuple(range(len(sp) - 1)),
                                                    vocab=tuple(sorted(set(sp[1:]))),
                                                    log_probs=True)))
    runner.run([c[-1] for c in conts])
    for job in prompts:
        job.kv = None
    rest = {(k, li, si): _continuation_logprob(job, label_sets[k].spellings[li][si][1:])
            for k, li, si, job in conts}
    out = []
    for k, lt in enumerate(label_sets):
        per_label = []
        for li, spellings in enumerate(lt.spellings):
            totals = [first[k][sp[0]] + rest.get((k, li, si), 0.0) for si, sp in
                      enumerate(spellings)]
            per_label.append(torch.logsumexp(torch.stack([torch.as_tensor(t) for t in totals]), 0))
        out.append(torch.stack(per_label))
    return out


def _continuation_logprob(job: SeqJob, targets: Sequence[int]) -> torch.Tensor:
    """Sum of log P(targets[i]) at read position i, from a job read with `log_probs`."""
    column = {t: c for c, t in enumerate(job.vocab)}
    return job.logits[torch.arange(len(targets)), torch.tensor([column[t] for t in targets])].sum()


def label_answers(labels: Sequence[str], scores: torch.Tensor,
                  reference: torch.Tensor | None) -> Answer:
    """Best label after calibration; `score` is its softmax share among the labels."""
    adjusted = calibrated(scores, reference)
    probs = torch.softmax(adjusted.float(), dim=-1)
    best = int(adjusted.argmax())
    return Answer(value=labels[best], score=float(probs[best]))
