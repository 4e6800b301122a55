"""LocalEngine's scoring: one-step readouts (booleans, scores, single-step labels) from one
read per request, span log-probabilities, and the calibration references both subtract,
computed once per distinct content-free prompt and cached."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch

from quail_engine.infer.api import (
    Answer,
    BooleanReadout,
    LabelReadout,
    Request,
    ScoreReadout,
    sigmoid,
)
from quail_engine.infer.labels import label_answers, score_labels
from quail_engine.infer.readout import (
    BooleanTokens,
    boolean_tokens,
    label_tokens,
    span_bounds,
    span_logprob,
)
from quail_engine.infer.runner import Runner, SeqJob
from quail_engine.infer.textio import TextCodec

log = logging.getLogger(__name__)
SPAN_READS = 256       # span positions per runner call: their full-vocabulary logits are held
SPAN_MAX_TOKENS = 128  # a longer span is scored on its first tokens


class Scoring:
    """LocalEngine's part that turns logits into scored answers; LocalEngine.__init__ sets the
    attributes below."""

    runner: Runner
    codec: TextCodec
    _references: dict[tuple, torch.Tensor]
    _token_sets: dict[tuple, Any]

    def _label_kv_tokens(self) -> int | None:
        """Prompt tokens whose KV label scoring may keep at once; None: no bound (the CPU's KV
        is the jobs' own memory)."""
        return None

    # -- readouts -----------------------------------------------------------------------------
    def _booleans(self, ro: BooleanReadout | ScoreReadout) -> BooleanTokens:
        key = ("bool", ro.true_words, ro.false_words)
        if key not in self._token_sets:
            self._token_sets[key] = boolean_tokens(self.codec.encode, ro.true_words,
                                                   ro.false_words)
        return self._token_sets[key]

    def _labels(self, ro: LabelReadout):
        key = ("labels", ro.labels)
        if key not in self._token_sets:
            self._token_sets[key] = label_tokens(self.codec.encode, ro.labels)
        return self._token_sets[key]

    def _vocab(self, ro: Any) -> tuple[int, ...]:
        return self._labels(ro).vocab if isinstance(ro, LabelReadout) else self._booleans(ro).vocab

    def _raw_scores(self, ro: Any, logits: torch.Tensor) -> torch.Tensor:
        """[N, len(vocab)] -> boolean margins [N] or label scores [N, num_labels]."""
        if isinstance(ro, LabelReadout):
            return self._labels(ro).first_step_scores(logits)
        return self._booleans(ro).margins(logits)

    def _one_step_answers(self, readouts: Sequence[Any], logits: Sequence[torch.Tensor]
                          ) -> list[Answer]:
        """Answers of one-step readouts; boolean and score readouts that share token sets and
        calibration are scored as one [N, vocab] block (one tensor op per group, not per row)."""
        out: list[Answer | None] = [None] * len(readouts)
        groups: dict[tuple, list[int]] = {}
        keys: dict[int, tuple | None] = {}  # per readout object (a batch shares a few)
        for i, ro in enumerate(readouts):
            key = keys.get(id(ro), False)
            if key is False:
                key = keys[id(ro)] = ((type(ro), self._reference_key(ro) or (
                    "raw", ro.true_words, ro.false_words))
                    if isinstance(ro, (BooleanReadout, ScoreReadout)) else None)
            if key is not None:
                groups.setdefault(key, []).append(i)
            else:
                out[i] = self._one_step_answer(ro, logits[i])
        for (kind, _), rows in groups.items():
            ro = readouts[rows[0]]
            raw = self._booleans(ro).margins(torch.cat([logits[i] for i in rows]))
            ref = self._reference(ro)
            margins = (raw - ref if ref is not None else raw).float().tolist()
            for i, margin in zip(rows, margins):
                p = sigmoid(margin)
                out[i] = (Answer(value=p, score=p, margin=margin) if kind is ScoreReadout
                          else Answer(value=margin > 0, score=p, margin=margin))
        return out  # type: ignore[return-value]

    def _one_step_answer(self, ro: Any, logits: torch.Tensor) -> Answer:
        raw = self._raw_scores(ro, logits)[0]
        if isinstance(ro, LabelReadout):
            return label_answers(ro.labels, raw, self._reference(ro))
        ref = self._reference(ro)
        margin = float(raw - ref) if ref is not None else float(raw)
        p = sigmoid(margin)
        if isinstance(ro, ScoreReadout):
            return Answer(value=p, score=p, margin=margin)
        return Answer(value=margin > 0, score=p, margin=margin)

    def _span_answers(self, requests: Sequence[Request], prefixes: Sequence[Any]) -> list[Answer]:
        """SpanReadout: the span's log-probability after the document minus after the
        calibration prefix (in place of the document and anything before the cue); that
        reference runs once per distinct question text (once per join partner)."""
        trail = len(self.codec.chat_split("", "")[1])
        bounds = []
        for r in requests:
            c, s, e = span_bounds(r.tokens, self.codec.encode(r.readout.cue), trail)
            bounds.append((c, s, min(e, s + SPAN_MAX_TOKENS)))
        keys = [("span", r.readout.calibration_prefix, tuple(r.tokens[c:]), s - c, e - c)
                for r, (c, s, e) in zip(requests, bounds)]
        out: list[Answer] = []
        start = 0
        while start < len(requests):
            stop, reads = start, 0
            while stop < len(requests) and (stop == start or reads < SPAN_READS):
                reads += 2 * (bounds[stop][2] - bounds[stop][1])
                stop += 1
            out += self._span_chunk(requests[start:stop], prefixes[start:stop],
                                    bounds[start:stop], keys[start:stop])
            start = stop
        return out

    def _span_chunk(self, requests, prefixes, bounds, keys) -> list[Answer]:
        jobs = [SeqJob(list(r.tokens), p, read=tuple(range(s - 1, e - 1)))
                for r, p, (_, s, e) in zip(requests, prefixes, bounds)]
        refs: dict[tuple, SeqJob] = {}
        for key in keys:
            _, cal, question, s, e = key
            if cal is not None and key not in self._references and key not in refs:
                head = self.codec.chat_split(cal, "")[0]
                refs[key] = SeqJob(head + list(question),
                                   read=tuple(range(len(head) + s - 1, len(head) + e - 1)))
        self.runner.run(jobs + list(refs.values()))
        for key, job in refs.items():
            self._references[key] = span_logprob(job.logits, key[2][key[3]:key[4]])
        out = []
        for r, job, key, (_, s, e) in zip(requests, jobs, keys, bounds):
            ref = 0.0 if key[1] is None else self._references[key]
            margin = span_logprob(job.logits, r.tokens[s:e]) - ref - r.readout.threshold
            out.append(Answer(value=margin > 0, score=sigmoid(margin), margin=margin))
        return out

    # -- calibration --------------------------------------------------------------------------
    @staticmethod
    def _reference_key(ro: Any) -> tuple | None:
        cal = getattr(ro, "calibration_tokens", None)
        if cal is None:
            return None
        if isinstance(ro, LabelReadout):
            return ("labels", ro.labels, tuple(cal))
        return ("bool", ro.true_words, ro.false_words, tuple(cal))

    def _reference(self, ro: Any) -> torch.Tensor | None:
        key = self._reference_key(ro)
        return None if key is None else self._references[key]

    def _prepare_references(self, readouts: Sequence[Any]) -> None:
        """Run each missing content-free prompt once (raw readout) and cache its scores."""
        todo: dict[tuple, Any] = {}
        for ro in readouts:
            key = self._reference_key(ro)
            if key is not None and key not in self._references:
                todo.setdefault(key, ro)
        one_step = [(k, ro) for k, ro in todo.items()
                    if not (isinstance(ro, LabelReadout) and not self._labels(ro).is_single_step)]
        forced = [(k, ro) for k, ro in todo.items() if (k, ro) not in one_step]
        jobs = [SeqJob(list(ro.calibration_tokens), vocab=self._vocab(ro)) for _, ro in one_step]
        self.runner.run(jobs)
        for (key, ro), job in zip(one_step, jobs):
            self._references[key] = self._raw_scores(ro, job.logits)[0]
        if forced:
            scores = score_labels(self.runner, [(None, list(ro.calibration_tokens))
                                                for _, ro in forced],
                                  [self._labels(ro) for _, ro in forced])
            for (key, _), s in zip(forced, scores):
                self._references[key] = s
        if todo:
            log.debug("computed %d calibration references", len(todo))
