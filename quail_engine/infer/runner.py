"""Forward passes: pack sequence jobs (scheduler), build the packed tensors, run the model, read
only the positions asked for against only the LM-head rows asked for, and split the results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from quail_engine.infer.api import EngineStats
from quail_engine.infer.interrupt import StopFlag
from quail_engine.infer.scheduler import Scheduler, SeqWork


@dataclass
class SeqJob:
    """One sequence to prefill.

    `prefix`: the model's PrefixKV this sequence continues (positions start after it), or None.
    `read`: offsets into `tokens` whose logits are wanted (negative = from the end).
    `vocab`: LM-head rows to compute (None = the full vocabulary).
    `log_probs`: return those columns as log-probabilities, normalized over the full vocabulary
    on the device (a few columns come back instead of every token's logit).
    `store_kv`: return the KV of the whole sequence (prefix + own tokens) in `kv`.
    `on_device`: leave `logits` on the model's device (the decode loop picks its tokens there,
    and only their ids cross to the host, not a full vocabulary's logits per step).
    Outputs: `logits` [len(read), len(vocab)], `kv`.
    """

    tokens: Sequence[int]
    prefix: Any = None
    read: Sequence[int] = (-1,)
    vocab: tuple[int, ...] | None = None
    store_kv: bool = False
    log_probs: bool = False
    on_device: bool = False
    logits: torch.Tensor | None = None
    kv: Any = None
    meta: dict = field(default_factory=dict)

    @property
    def num_prefix_tokens(self) -> int:
        return 0 if self.prefix is None else self.prefix.num_tokens


def head_log_probs(model: Any, hidden: torch.Tensor, columns: Sequence[int],
                   rows_per_chunk: int = 1024) -> torch.Tensor:
    """`columns` of the model's log-probabilities over the whole vocabulary for every row of
    `hidden`, [rows, len(columns)] float32: the LM head runs a chunk of rows at a time, so no
    more than `rows_per_chunk` rows of full-vocabulary logits exist at once (a pass scoring
    labels reads every label token: a few dozen classes over a full pass would ask for tens of
    GB of float32 logits in one piece at 262,144 columns a row)."""
    vocab = getattr(model, "vocab_logits", None)
    if vocab is not None:  # the columns in float32, the normalizer on the tensor cores
        ids = torch.tensor(list(columns), dtype=torch.long, device=hidden.device)
        out = [model.logits(h, ids) - torch.logsumexp(vocab(h), dim=-1, keepdim=True)
               for h in hidden.split(rows_per_chunk)]
    else:
        out = [log_prob_columns(model.logits(h, None), columns, rows_per_chunk)
               for h in hidden.split(rows_per_chunk)]
    return torch.cat(out) if out else torch.zeros((0, len(columns)), dtype=torch.float32,
                                                  device=hidden.device)


def log_prob_columns(logits: torch.Tensor, columns: Sequence[int],
                     rows_per_chunk: int = 1024) -> torch.Tensor:
    """`logits`' `columns` as log-probabilities over the whole vocabulary, [rows, len(columns)]
    in float32, computed a chunk of rows at a time (a float32 copy of every row's logits would
    be rows x vocabulary x 4 bytes)."""
    cols = torch.tensor(list(columns), dtype=torch.long, device=logits.device)
    out = []
    for lo in range(0, logits.shape[0], rows_per_chunk):
        part = logits[lo:lo + rows_per_chunk].float()
        out.append(part[:, cols] - torch.logsumexp(part, dim=-1, keepdim=True))
    return torch.cat(out) if out else logits.new_zeros((0, len(cols)), dtype=torch.float32)


class Runner:
    """Runs `SeqJob`s through `model`, many per forward pass, and counts the work in `stats`."""

    def __init__(self, model: Any, scheduler: Scheduler, stats: EngineStats,
                 device: torch.device | str = "cpu"):
        self.model = model
        self.scheduler = scheduler
        self.stats = stats
        self.device = torch.device(device)
        self.stop = StopFlag()
        if hasattr(model, "stop"):
            model.stop = self.stop

    def run(self, jobs: Sequence[SeqJob], count_as_decode: bool = False) -> None:
        work = [SeqWork(len(j.tokens), j.num_prefix_tokens) for j in jobs]
        for batch in self.scheduler.pack(work):
            self.stop.check()
            self._run_pass([jobs[i] for i in batch], count_as_decode)

    @torch.inference_mode()
    def _run_pass(self, jobs: list[SeqJob], count_as_decode: bool) -> None:
        ids, positions, cu, reads, read_owner = [], [], [0], [], []
        for k, job in enumerate(jobs):
            n, start = len(job.tokens), job.num_prefix_tokens
            ids.extend(job.tokens)
            positions.extend(range(start, start + n))
            for r in job.read:
                off = r if r >= 0 else n + r
                if not 0 <= off < n:
                    raise ValueError(f"read offset {r} outside a sequence of {n} tokens")
                reads.append(cu[-1] + off)
                read_owner.append(k)
            cu.append(cu[-1] + n)
        dev = self.device
        hidden, kvs = self.model.forward(
            torch.tensor(ids, dtype=torch.long, device=dev),
            torch.tensor(positions, dtype=torch.long, device=dev),
            torch.tensor(cu, dtype=torch.int32, device=dev),
            [j.prefix for j in jobs],
            torch.tensor(reads, dtype=torch.long, device=dev),
            [j.store_kv for j in jobs],
        )
        self.stats.forward_passes += 1
        if count_as_decode:
            self.stats.decode_tokens += len(ids)
        else:
            self.stats.fresh_tokens += len(ids)
        self._split_logits(jobs, hidden, read_owner)
        for job, kv in zip(jobs, kvs):
            if job.store_kv:
                job.kv = kv if job.prefix is None else job.prefix.concat(kv)

    def _split_logits(self, jobs: list[SeqJob], hidden: torch.Tensor,
                      read_owner: list[int]) -> None:
        owner = torch.tensor(read_owner, dtype=torch.long)
        normed = [k for k, j in enumerate(jobs) if j.read and j.log_probs]
        full = [k for k, j in enumerate(jobs) if j.read and j.vocab is None and not j.log_probs]
        subset = [k for k, j in enumerate(jobs) if j.read and j.vocab is not None
                  and not j.log_probs]
        if normed:
            rows = torch.isin(owner, torch.tensor(normed)).nonzero().flatten()
            union = sorted({t for k in normed for t in (jobs[k].vocab or ())})
            logits = head_log_probs(self.model, hidden[rows.to(hidden.device)], union)
            self._assign(jobs, owner[rows], logits, {t: c for c, t in enumerate(union)})
        if full:
            rows = torch.isin(owner, torch.tensor(full)).nonzero().flatten()
            self._assign(jobs, owner[rows], self.model.logits(hidden[rows.to(hidden.device)], None),
                         None)
        if subset:
            union = sorted({t for k in subset for t in jobs[k].vocab})
            rows = torch.isin(owner, torch.tensor(subset)).nonzero().flatten()
            union_t = torch.tensor(union, dtype=torch.long, device=hidden.device)
            logits = self.model.logits(hidden[rows.to(hidden.device)], union_t)
            self._assign(jobs, owner[rows], logits, {t: c for c, t in enumerate(union)})

    @staticmethod
    def _assign(jobs: list[SeqJob], owners: torch.Tensor, logits: torch.Tensor,
                column: dict[int, int] | None) -> None:
        logits = logits.float().cpu()
        union = tuple(column) if column is not None else None
        for k in owners.unique().tolist():
            rows = (owners == k).nonzero().flatten()
            part = logits[rows]
            if column is not None and tuple(jobs[k].vocab) != union:
                part = part[:, [column[t] for t in jobs[k].vocab]]
            jobs[k].logits = part
