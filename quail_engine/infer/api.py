"""The engine's request API: what the planner/executor hands the inference engine.

A request is (shared prefix or none, own tokens, readout). A prefix's KV is computed once by
`Engine.add_prefix` and kept in the KV arena until every holder has called `release`; requests
that name it attend to that KV plus their own tokens, whose KV is never stored. This module
imports no torch so the planner and its fakes can use it anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class BooleanReadout:
    """Answer = best TRUE-token logit vs best FALSE-token logit at the last position.

    `calibration_tokens`: the full token ids (prefix + own) of the same prompt with a
    content-free document ("N/A"); its TRUE-FALSE margin is subtracted (computed once per
    distinct tuple). None disables calibration.
    """

    true_words: tuple[str, ...] = ("yes", "true")
    false_words: tuple[str, ...] = ("no", "false")
    calibration_tokens: tuple[int, ...] | None = None


@dataclass(frozen=True)
class LabelReadout:
    """Pick one of `labels` (one forward when first tokens differ, else teacher-forced scoring)."""

    labels: tuple[str, ...]
    calibration_tokens: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ScoreReadout:
    """Probability of TRUE, in [0, 1] (same token sets as BooleanReadout)."""

    true_words: tuple[str, ...] = ("yes", "true")
    false_words: tuple[str, ...] = ("no", "false")
    calibration_tokens: tuple[int, ...] | None = None


@dataclass(frozen=True)
class GenerateReadout:
    """Greedy decode up to `max_tokens`, stopping at EOS or any of `stop`."""

    max_tokens: int = 64
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class SpanReadout:
    """Answer = how much the prefix (the document) raises the likelihood of a span of the
    request's own tokens: log P(span | prefix) - log P(span | calibration prefix), in nats (the
    pointwise mutual information of document and span), compared with `threshold`.

    The span is what follows `cue` in the own tokens, up to the answer header the chat layout
    appends. `calibration_prefix`: the text that stands in for the document part ("Text:\\nN/A
    \\n\\n"); its reference is computed once per distinct own-token sequence (once per join
    partner). value: bool; score: sigmoid(PMI - threshold); margin: PMI - threshold.
    """

    cue: str
    threshold: float = 0.0
    calibration_prefix: str | None = None


Readout = BooleanReadout | LabelReadout | ScoreReadout | GenerateReadout | SpanReadout


@dataclass(frozen=True)
class PrefixHandle:
    """A resident prefix's KV in the arena. `num_tokens` counts its tokens."""

    id: int
    num_tokens: int


@dataclass(frozen=True)
class Request:
    tokens: tuple[int, ...]
    readout: Readout
    prefix: PrefixHandle | None = None


@dataclass(frozen=True)
class Answer:
    """`value`: bool (boolean), str (label, generate) or float (score).
    `score`: P(TRUE) for boolean/score, the chosen label's probability for labels, None for text.
    `margin`: calibrated TRUE-FALSE logit margin for boolean/score readouts."""

    value: bool | str | float
    score: float | None = None
    margin: float | None = None


@dataclass
class EngineStats:
    """Counters the execution report reads. requested = every prompt token a request names
    (its prefix's tokens included); fresh = prompt tokens actually run through the model
    (prefix computation, request suffixes, calibration prompts, teacher-forced label tokens);
    decode_tokens = tokens fed back during greedy decode; forward_passes counts every pass;
    gpu_pass_s = GPU seconds from each forward pass's first kernel to its last (CUDA events in
    stream order, so gaps between passes are not in it; 0 on the CPU), counted as passes
    complete."""

    requested_tokens: int = 0
    fresh_tokens: int = 0
    forward_passes: int = 0
    gpu_pass_s: float = 0.0
    decode_tokens: int = 0
    prefixes_resident: int = 0


class Engine(Protocol):
    model_id: str
    max_context: int
    stats: EngineStats

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]: ...

    def chat_split(self, prefix_text: str, suffix_text: str) -> tuple[list[int], list[int]]:
        """Token ids of one user turn `prefix_text + suffix_text` under the model's chat layout,
        split so the first list can be shared: the chat header + prefix_text, then suffix_text +
        the assistant header. Concatenated, they are the prompt the model answers."""
        ...

    def add_prefix(self, tokens: Sequence[int]) -> PrefixHandle:
        """Compute `tokens`' KV once and keep it, with one reference, until released."""
        ...

    def add_prefixes(self, token_lists: Sequence[Sequence[int]]) -> list[PrefixHandle]:
        """Several prefixes packed into as few forward passes as the token budget allows."""
        ...

    def retain(self, handle: PrefixHandle) -> None: ...

    def release(self, handle: PrefixHandle) -> None: ...

    def run(self, requests: Sequence[Request]) -> list[Answer]: ...
