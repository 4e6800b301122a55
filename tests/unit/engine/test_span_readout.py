"""SpanReadout (two-argument questions): the partner's log-probability after the document minus
after the content-free document, the same whether or not the document is a separate prefix, with
one reference per distinct partner."""

from __future__ import annotations

import pytest
import torch

from quail_engine.infer.api import Request, SpanReadout
from quail_engine.infer.readout import span_bounds

CUE = "question is it about\nAnswer:"
CAL = "N/A\n\n"
DOCS = ["the movie was great", "a bad film", "sports news"]
PARTNERS = ["the movie", "sports"]


@pytest.mark.parametrize("tokens, cue, trail, expected", [
    ([5, 6, 7, 8, 9, 1, 2], [5, 6, 7], 2, (0, 3, 5)),            # document in a prefix
    ([0, 9, 9, 5, 6, 7, 8, 1, 2], [5, 6, 7], 2, (3, 6, 7)),      # document in the own tokens
    ([5, 6, 70, 8, 1, 2], [5, 6, 7], 2, (0, 2, 4)),              # cue's last token merged
    ([5, 6, 7, 3, 5, 6, 7, 8, 1, 2], [5, 6, 7], 2, (4, 7, 8)),   # the cue's last occurrence
    ([3, 4, 8, 1, 2], [5, 6, 7], 2, (0, 1, 3)),                  # no cue: all but the first
    ([5, 6, 7, 1, 2], [5, 6, 7], 2, (0, 3, 3)),                  # empty span
])
def test_span_bounds(tokens, cue, trail, expected):
    assert span_bounds(tokens, cue, trail) == expected


def _reference_pmi(tiny_llama, engine, doc: str, partner: str) -> float:
    """log P(partner | doc, cue) - log P(partner | N/A, cue) from transformers' full forward."""
    hf = tiny_llama[0]
    trail = len(engine.chat_split("", "")[1])
    out = []
    for document in (doc, CAL):
        head, tail = engine.chat_split(document, f"{CUE} {partner}")
        _, start, end = span_bounds(tail, engine.codec.encode(CUE), trail)
        ids = head + tail
        with torch.no_grad():
            logp = torch.log_softmax(hf(torch.tensor([ids])).logits[0].float(), dim=-1)
        pos = range(len(head) + start - 1, len(head) + end - 1)
        out.append(sum(float(logp[p, ids[p + 1]]) for p in pos))
    return out[0] - out[1]


def test_span_margin_is_the_partners_pmi_with_or_without_a_prefix(tiny_llama, engine):
    readout = SpanReadout(CUE, threshold=0.5, calibration_prefix=CAL)
    for doc in DOCS:
        for partner in PARTNERS:
            head, tail = engine.chat_split(doc, f"{CUE} {partner}")
            handle = engine.add_prefix(head)
            shared, = engine.run([Request(tuple(tail), readout, handle)])
            engine.release(handle)
            flat, = engine.run([Request(tuple(head + tail), readout)])
            pmi = _reference_pmi(tiny_llama, engine, doc, partner)
            assert shared.margin == pytest.approx(pmi - 0.5, abs=1e-3)
            assert flat.margin == pytest.approx(shared.margin, abs=1e-3)
            assert shared.value == (shared.margin > 0)


def test_span_reference_runs_once_per_partner(engine):
    readout = SpanReadout(CUE, calibration_prefix=CAL)
    heads = [engine.chat_split(d, "")[0] for d in DOCS]
    tails = [engine.chat_split("", f"{CUE} {p}")[1] for p in PARTNERS]
    handles = engine.add_prefixes(heads)
    before = engine.stats.fresh_tokens
    engine.run([Request(tuple(t), readout, h) for h in handles for t in tails])
    cal_head = engine.chat_split(CAL, "")[0]
    assert engine.stats.fresh_tokens - before == (
        len(DOCS) * sum(map(len, tails)) + sum(len(cal_head) + len(t) for t in tails))
    before = engine.stats.fresh_tokens
    engine.run([Request(tuple(tails[0]), readout, handles[0])])  # its reference is cached
    assert engine.stats.fresh_tokens - before == len(tails[0])


def test_long_spans_are_scored_on_their_first_tokens_in_bounded_chunks(tiny_llama, engine,
                                                                       monkeypatch):
    from quail_engine.infer import engine_scoring

    readout = SpanReadout(CUE, calibration_prefix=CAL)
    requests = [Request(tuple(sum(engine.chat_split(d, f"{CUE} {p} great film"), [])), readout)
                for d in DOCS for p in PARTNERS]
    full = engine.run(requests)
    monkeypatch.setattr(engine_scoring, "SPAN_MAX_TOKENS", 2)
    monkeypatch.setattr(engine_scoring, "SPAN_READS", 1)   # one request per runner call
    calls = []
    monkeypatch.setattr(engine.runner, "run", lambda jobs, f=engine.runner.run: (
        calls.append(len(jobs)), f(jobs))[1])
    capped = engine.run(requests)
    span_calls = [n for n in calls if n]  # a request and, the first time, its reference
    assert len(span_calls) == len(requests) and max(span_calls) <= 2
    for (d, p), a, b in zip([(d, p) for d in DOCS for p in PARTNERS], capped, full):
        first_two = " ".join(p.split()[:2]) if len(p.split()) >= 2 else f"{p} great"
        assert a.margin == pytest.approx(_reference_pmi(tiny_llama, engine, d, first_two), abs=1e-3)
        assert a.margin != pytest.approx(b.margin, abs=1e-6)
