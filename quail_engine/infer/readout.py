"""Readouts: which answer tokens to read, and how their logits become answers.

Boolean and single-step label readouts look at the last prompt position only, against the LM-head
rows of a handful of answer tokens. Each answer word stands for its case and leading-space
variants ("yes", "Yes", "YES", " yes", ...). Content-free calibration subtracts the margin (or
label scores) the same prompt gives for an "N/A" document. Span readouts (two-argument questions)
score a span of the request's own tokens over the full vocabulary: how much the document raises
its log-probability over the content-free document's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

Encode = Callable[[str], list[int]]


def word_variants(word: str) -> list[str]:
    """Case and leading-space spellings of `word`, most canonical first, no duplicates."""
    cased = [word, word.lower(), word[:1].upper() + word[1:].lower(), word.upper()]
    out: dict[str, None] = {}
    for w in cased:
        out.setdefault(w, None)
        out.setdefault(" " + w, None)
    return list(out)


def answer_token_ids(encode: Encode, words: Sequence[str]) -> tuple[int, ...]:
    """Token ids that start an answer of any of `words`: every variant spelled by ONE token;
    for a word with no single-token variant, the first token of each variant."""
    ids: dict[int, None] = {}
    for word in words:
        encoded = [encode(v) for v in word_variants(word)]
        singles = [e[0] for e in encoded if len(e) == 1]
        for t in singles or [e[0] for e in encoded if e]:
            ids.setdefault(t, None)
    return tuple(ids)


@dataclass(frozen=True)
class BooleanTokens:
    true_ids: tuple[int, ...]
    false_ids: tuple[int, ...]

    @property
    def vocab(self) -> tuple[int, ...]:
        return self.true_ids + self.false_ids

    def margins(self, logits: torch.Tensor) -> torch.Tensor:
        """[N, len(vocab)] logits -> [N] best TRUE logit minus best FALSE logit."""
        n = len(self.true_ids)
        return logits[:, :n].max(dim=-1).values - logits[:, n:].max(dim=-1).values


def boolean_tokens(encode: Encode, true_words: Sequence[str],
                   false_words: Sequence[str]) -> BooleanTokens:
    """TRUE and FALSE answer-token sets; a token in both (e.g. a shared first piece) is dropped."""
    t = answer_token_ids(encode, true_words)
    f = answer_token_ids(encode, false_words)
    both = set(t) & set(f)
    t = tuple(i for i in t if i not in both)
    f = tuple(i for i in f if i not in both)
    if not t or not f:
        raise ValueError(f"answer words {list(true_words)} / {list(false_words)} share every "
                         "first token; pick words that start differently")
    return BooleanTokens(t, f)


@dataclass(frozen=True)
class LabelTokens:
    """Per label: the first tokens of its variants (`first_ids`; less those other labels'
    variants begin with too, where that leaves every label its own: `_owned_firsts`), and its
    full token spellings for teacher-forced scoring (`spellings`: the label as written, bare
    and after a space)."""

    labels: tuple[str, ...]
    first_ids: tuple[tuple[int, ...], ...]
    spellings: tuple[tuple[tuple[int, ...], ...], ...]

    @property
    def is_single_step(self) -> bool:
        """True when no first token is shared between labels: one forward decides."""
        seen: set[int] = set()
        for ids in self.first_ids:
            if seen & set(ids):
                return False
            seen |= set(ids)
        return True

    @property
    def vocab(self) -> tuple[int, ...]:
        return tuple(t for ids in self.first_ids for t in ids)

    def first_step_scores(self, logits: torch.Tensor) -> torch.Tensor:
        """[N, len(vocab)] logits -> [N, num_labels]: each label's best first-token logit."""
        out, start = [], 0
        for ids in self.first_ids:
            out.append(logits[:, start:start + len(ids)].max(dim=-1).values)
            start += len(ids)
        return torch.stack(out, dim=-1)


def label_tokens(encode: Encode, labels: Sequence[str]) -> LabelTokens:
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise ValueError(f"labels must be at least two distinct strings, got {list(labels)}")
    firsts, spellings = [], []
    for label in labels:
        encoded = [e for e in (encode(v) for v in word_variants(label)) if e]
        if not encoded:
            raise ValueError(f"label {label!r} has no tokens")
        firsts.append(tuple(dict.fromkeys(e[0] for e in encoded)))
        spellings.append(tuple(dict.fromkeys(tuple(encode(s)) for s in (label, " " + label))))
    return LabelTokens(tuple(labels), _owned_firsts(firsts, spellings), tuple(spellings))


def _owned_firsts(firsts: list[tuple[int, ...]], spellings: list[tuple[tuple[int, ...], ...]]
                  ) -> tuple[tuple[int, ...], ...]:
    """Each label's first tokens less those another label's variants begin with too, when every
    label's own spellings (as written, bare and after a space) begin with tokens no other label
    has: a shared token of a case variant (" IN" of "INFECTIONS" and "INJURY") says nothing
    about which label follows, as a shared piece of TRUE and FALSE words says nothing
    (boolean_tokens drops it), and keeping it would send the whole set to teacher-forced scoring
    of every label. Where a label's own spelling shares its first token, the set is kept as
    it is (it is not single-step: labels are told apart by their later tokens)."""
    owners: dict[int, set[int]] = {}
    for k, ids in enumerate(firsts):
        for t in ids:
            owners.setdefault(t, set()).add(k)
    if any(len(owners[sp[0]]) > 1 for sps in spellings for sp in sps if sp):
        return tuple(firsts)
    return tuple(tuple(t for t in ids if len(owners[t]) == 1) for ids in firsts)


def calibrated(values: torch.Tensor, reference: torch.Tensor | None) -> torch.Tensor:
    """Subtract the content-free reference (margin or per-label scores) when there is one."""
    return values if reference is None else values - reference


def span_bounds(tokens: Sequence[int], cue_ids: Sequence[int], trail: int) -> tuple[int, int, int]:
    """(cue_start, start, end) of a SpanReadout in a request's own `tokens`: where the cue's last
    occurrence begins (0 when the document is a separate prefix, after the document when it is
    not), and the span [start, end) after the cue, before the last `trail` tokens (the answer
    header). The cue's last token may merge with the span's first, so the cue is searched
    without it. A cue not found is taken to start the tokens; `start` is at least 1, so the
    position that predicts the span's first token is one of `tokens`."""
    probe = list(cue_ids[:max(1, len(cue_ids) - 1)])
    cue_start = next((j for j in range(len(tokens) - len(probe), -1, -1)
                      if tokens[j] == probe[0] and list(tokens[j:j + len(probe)]) == probe), 0)
    start = cue_start
    while (start - cue_start < len(cue_ids) and start < len(tokens)
           and tokens[start] == cue_ids[start - cue_start]):
        start += 1
    start = max(start, 1)
    return cue_start, start, max(start, len(tokens) - trail)


def span_logprob(logits: torch.Tensor, targets: Sequence[int]) -> float:
    """[len(targets), vocab] logits (each row predicts the next target) -> the targets' summed
    log-probability."""
    if not targets:
        return 0.0
    logp = torch.log_softmax(logits.float(), dim=-1)
    return float(logp[torch.arange(len(targets)), torch.tensor(list(targets))].sum())
