"""Greedy decode with a KV cache: prefill each prompt once (keeping its KV), then one token per
sequence per step, all live sequences packed into one forward pass, until EOS, a stop string or
`max_tokens`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from quail_engine.infer.runner import Runner, SeqJob


@dataclass
class DecodeSeq:
    """One prompt to continue: `prefix` KV (or None) + own `tokens`."""

    tokens: Sequence[int]
    prefix: Any = None
    max_tokens: int = 64
    stop: tuple[str, ...] = ()
    repetition_penalty: float = 1.0  # GenerateReadout's: on the tokens generated so far
    out_tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish: str = ""        # "eos", "stop", "length"


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """`text` up to the earliest stop string, and whether one was found."""
    hits = [text.find(s) for s in stop if s and s in text]
    return (text[:min(hits)], True) if hits else (text, False)


def _next_token(logits, seq: DecodeSeq) -> int:
    """The argmax of `logits` after `seq`'s repetition penalty on the tokens it generated."""
    if seq.repetition_penalty == 1.0 or not seq.out_tokens:
        return int(logits.argmax())
    import torch

    seen = torch.tensor(sorted(set(seq.out_tokens)), device=logits.device)
    logits = logits.float().clone()
    values = logits[seen]
    logits[seen] = torch.where(values > 0, values / seq.repetition_penalty,
                               values * seq.repetition_penalty)
    return int(logits.argmax())


def greedy_decode(runner: Runner, seqs: Sequence[DecodeSeq], eos_ids: set[int],
                  detokenize: Callable[[list[int]], str]) -> None:
    """Fill each seq's `out_tokens`, `text` and `finish` (EOS and stop strings not included)."""
    live = [s for s in seqs if s.max_tokens > 0]
    for s in seqs:
        if s.max_tokens <= 0:
            s.finish = "length"
    if not live:
        return
    jobs = [SeqJob(tokens=list(s.tokens), prefix=s.prefix, store_kv=True) for s in live]
    runner.run(jobs)
    while live:
        still, step_jobs = [], []
        for s, job in zip(live, jobs):
            token = _next_token(job.logits[-1], s)
            if token in eos_ids:
                s.finish = "eos"
                continue
            s.out_tokens.append(token)
            s.text, stopped = cut_at_stop(detokenize(s.out_tokens), s.stop)
            if stopped:
                s.finish = "stop"
            elif len(s.out_tokens) >= s.max_tokens:
                s.finish = "length"
            else:
                still.append(s)
                step_jobs.append(SeqJob(tokens=[token], prefix=job.kv, store_kv=True))
        live, jobs = still, step_jobs
        if live:
            runner.run(jobs, count_as_decode=True)
