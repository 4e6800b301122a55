"""The re-ask band: a fast precision answers first, the reference precision decides the close
calls, so a decision is the reference's whatever precision ran it.

A yes/no or label decision is the sign of a margin (the calibrated yes-no logit gap, the gap
between the two best labels, a pair's PMI less its threshold). A faster precision moves each
margin by a little; a decision whose fast margin is further from zero than the largest move that
precision makes cannot differ from the reference's, and one inside that band is asked again in
float32. The bands are measured per model and precision (`python -m bench trust --bands`,
written to bands.json beside this module, keyed by the model file's SHA-256 like the
fingerprints) and never guessed: for a model without one, `auto` runs float32 on a CPU and the
unbanded precision on a GPU, whose report says so (infer/factory.py).

`ReaskingEngine` wraps the fast engine. It remembers each resident prefix's tokens, so a
request over a prefix can be asked again in full on the reference engine (loaded on the first
re-ask). A score (AI_SCORE's probability) the SQL compares with a number is decided at each
such threshold: it is re-asked when its margin lies within the yes/no band of the threshold's
(a score only read is a value, not a decision, and is not re-asked). Generated text is a chain
of decisions, one per token: where the band measured for decoding holds (`Band.decode`: the
largest shift of any step's top-two logit gap, teacher-forced on the reference's own tokens,
`python -m bench decode_band`), an answer none of whose steps came within it is the
reference's text token for token, and one that did is written again in float32 (where the
bench found that to be most answers, `decode_direct`, all are written in float32 at once);
without a measured decode band, generated text is the fast precision's. The report says which
answers were re-asked.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quail_engine.infer.api import (
    Answer,
    BooleanReadout,
    GenerateReadout,
    LabelReadout,
    PrefixHandle,
    Request,
    ScoreReadout,
    SpanReadout,
    logit,
)

log = logging.getLogger(__name__)
BANDS_FILE = Path(__file__).with_name("bands.json")


@dataclass(frozen=True)
class Band:
    """Half-widths, in the margin's own units, inside which a decision is asked again;
    `reference_s` / `banded_s`: what the trust bench's prompts took at the reference
    precision and banded (None: not measured)."""

    boolean: float
    label: float
    span: float
    reference_s: float | None = None
    banded_s: float | None = None
    decode: float | None = None  # a generated answer's smallest step margin; None: unmeasured
    # most generated answers came within `decode` on the bench: write them in float32 at once
    decode_direct: bool = False

    @property
    def faster_than_reference(self) -> bool:
        return (self.reference_s is not None and self.banded_s is not None
                and self.banded_s < self.reference_s)

    def holds(self, readout: Any, answer: Answer) -> bool:
        """Whether `answer` to `readout` is a close call this band sends to the reference."""
        if answer.margin is None:
            return False
        if isinstance(readout, ScoreReadout):  # P(yes) = sigmoid(margin), against each cut
            return any(abs(answer.margin - logit(p)) <= self.boolean
                       for p in readout.thresholds)
        if isinstance(readout, BooleanReadout):
            width = self.boolean
        elif isinstance(readout, LabelReadout):
            width = self.label
        elif isinstance(readout, SpanReadout):
            if readout.thresholds is not None:  # a value the SQL compares at these margins
                return any(abs(answer.margin - t) <= self.span for t in readout.thresholds)
            width = self.span
        elif isinstance(readout, GenerateReadout) and self.decode is not None:
            width = self.decode
        else:
            return False
        return abs(answer.margin) <= width


def band_for(sha256: str | None, precision: str) -> Band | None:
    """The committed band of the model file with this SHA-256 at `precision` ("bf16-cpu",
    "bf16-cuda", "fp8-block-cuda", ...), or None when none was measured."""
    if not sha256 or not BANDS_FILE.exists():
        return None
    for entry in json.loads(BANDS_FILE.read_text())["models"].values():
        if entry["gguf_sha256"] == sha256 and precision in entry["bands"]:
            b = entry["bands"][precision]
            seconds = b.get("seconds", {})
            return Band(b["boolean"], b["label"], b["span"], seconds.get("reference"),
                        seconds.get("banded"), b.get("decode"), b.get("decode_direct", False))
    return None


class ReaskingEngine:
    """`fast` answers; its decisions inside `band` are answered again by the engine
    `reference()` returns (called once, on the first re-ask). Everything else is `fast`'s."""

    def __init__(self, fast: Any, reference: Callable[[], Any], band: Band):
        self._fast = fast
        self._make_reference = reference
        self._reference: Any = None
        self.band = band
        self.reasked = 0  # decisions answered by the reference so far
        self.changed = 0  # of those, the ones whose value the fast engine had wrong
        self._tokens: dict[int, tuple[int, ...]] = {}  # resident prefix id -> its full tokens
        self._refs: dict[int, int] = {}
        if band.decode is not None:  # generated answers then carry their smallest step margin
            fast.track_decode_margins = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fast, name)

    # -- prefixes: the fast engine's, their tokens remembered ---------------------------------
    def add_prefix(self, tokens: Sequence[int], parent: PrefixHandle | None = None
                   ) -> PrefixHandle:
        handle = (self._fast.add_prefix(tokens) if parent is None
                  else self._fast.add_prefix(tokens, parent))
        base = self._tokens[parent.id] if parent is not None else ()
        self._hold(handle, base + tuple(tokens))
        return handle

    def add_prefixes(self, token_lists: Sequence[Sequence[int]],
                     parent: PrefixHandle | None = None) -> list[PrefixHandle]:
        if not hasattr(self._fast, "add_prefixes"):  # an engine with add_prefix alone
            return [self.add_prefix(tokens, parent) for tokens in token_lists]
        handles = self._fast.add_prefixes(token_lists, parent)
        base = self._tokens[parent.id] if parent is not None else ()
        for handle, tokens in zip(handles, token_lists):
            self._hold(handle, base + tuple(tokens))
        return handles

    def extend_prefixes(self, handles: Sequence[PrefixHandle], tokens: Sequence[int]
                        ) -> list[PrefixHandle]:
        out = self._fast.extend_prefixes(handles, tokens)
        for old, new in zip(handles, out):
            self._hold(new, self._tokens[old.id] + tuple(tokens))
        return out

    def _hold(self, handle: PrefixHandle, tokens: tuple[int, ...]) -> None:
        self._tokens[handle.id] = tokens
        self._refs[handle.id] = self._refs.get(handle.id, 0) + 1

    def retain(self, handle: PrefixHandle) -> None:
        self._fast.retain(handle)
        self._refs[handle.id] = self._refs.get(handle.id, 0) + 1

    def release(self, handle: PrefixHandle) -> None:
        self._fast.release(handle)
        left = self._refs.get(handle.id, 0) - 1
        if left > 0:
            self._refs[handle.id] = left
        else:
            self._refs.pop(handle.id, None)
            self._tokens.pop(handle.id, None)

    def interrupt(self) -> None:
        self._fast.interrupt()
        if self._reference is not None:
            self._reference.interrupt()

    def resume(self) -> None:
        self._fast.resume()
        if self._reference is not None:
            self._reference.resume()

    # -- requests -----------------------------------------------------------------------------
    def run(self, requests: Sequence[Request]) -> list[Answer]:
        direct = [i for i, r in enumerate(requests) if self._writes_direct(r.readout)]
        answers: list[Answer | None] = [None] * len(requests)
        if direct:
            for i, answer in zip(direct, self._ask_reference([requests[i] for i in direct])):
                answers[i] = answer
            self.reasked += len(direct)
        rest = [i for i in range(len(requests)) if answers[i] is None]
        if rest:
            for i, answer in zip(rest, self._fast.run([requests[i] for i in rest])):
                answers[i] = answer
        close = [i for i in rest if self.band.holds(requests[i].readout, answers[i])]
        if close:
            for i, answer in zip(close, self._ask_reference([requests[i] for i in close])):
                self.changed += answer.value != answers[i].value
                answers[i] = answer
            self.reasked += len(close)
        return answers  # type: ignore[return-value]

    def offer(self, requests: Sequence[Request]) -> None:
        """The next call's requests that `run` will ask the fast engine (Generation.offer)."""
        offer = getattr(self._fast, "offer", None)
        if offer is not None:
            offer([r for r in requests if not self._writes_direct(r.readout)])

    def ask_reference(self, requests: Sequence[Request]) -> list[Answer]:
        """`requests` answered at the reference precision, counted as re-asked: for a value
        made of several answers (a similarity's two directions), whose closeness to the SQL's
        numbers only the caller that combines them can judge."""
        self.reasked += len(requests)
        return self._ask_reference(requests)

    def _writes_direct(self, readout: Any) -> bool:
        """Generated text the band would send back nearly always goes to the reference at once
        (asking the fast precision first would only add its time)."""
        return (isinstance(readout, GenerateReadout) and self.band.decode is not None
                and self.band.decode_direct)

    def _ask_reference(self, requests: Sequence[Request]) -> list[Answer]:
        if self._reference is None:
            log.info("loading the reference-precision engine for the re-ask band")
            self._reference = self._make_reference()
        return self._reference.run([Request(self._full_tokens(r), r.readout)
                                    for r in requests])

    def _full_tokens(self, request: Request) -> tuple[int, ...]:
        head = self._tokens[request.prefix.id] if request.prefix is not None else ()
        return head + tuple(request.tokens)

