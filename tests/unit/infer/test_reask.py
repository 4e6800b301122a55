"""The re-ask band: close calls go to the reference engine in full (prefix tokens + own), the
rest keep the fast engine's answers; the band is read per model and precision."""

from __future__ import annotations

import json

import pytest

from quail_engine.infer import reask
from quail_engine.infer.api import (
    Answer,
    BooleanReadout,
    GenerateReadout,
    LabelReadout,
    PrefixHandle,
    Request,
    ScoreReadout,
    SpanReadout,
)
from quail_engine.infer.reask import Band, ReaskingEngine


class FakeEngine:
    """Margin of a request = its margin table's entry for its full tokens (prefix + own)."""

    def __init__(self, margins: dict[tuple, float]):
        self.margins = margins
        self.prefixes: dict[int, tuple] = {}
        self.calls: list[list[tuple]] = []
        self.released: list[int] = []
        self.model_id = "fake"

    def add_prefix(self, tokens, parent=None):
        return self.add_prefixes([tokens], parent)[0]

    def add_prefixes(self, token_lists, parent=None):
        out = []
        for tokens in token_lists:
            pid = len(self.prefixes) + 1
            self.prefixes[pid] = (self.prefixes[parent.id] if parent else ()) + tuple(tokens)
            out.append(PrefixHandle(pid, len(self.prefixes[pid])))
        return out

    def extend_prefixes(self, handles, tokens):
        return [self.add_prefixes([tokens], h)[0] for h in handles]

    def retain(self, handle):
        pass

    def release(self, handle):
        self.released.append(handle.id)

    def run(self, requests):
        fulls = [(self.prefixes[r.prefix.id] if r.prefix else ()) + tuple(r.tokens)
                 for r in requests]
        self.calls.append(fulls)
        return [Answer(self.margins[f] > 0, margin=self.margins[f]) for f in fulls]


def test_close_calls_are_asked_again_in_full_and_the_rest_kept():
    fast = FakeEngine({(1, 2, 3): 0.05, (1, 2, 4): 2.0, (9,): -0.1})
    ref = FakeEngine({(1, 2, 3): -0.3, (9,): -0.2})
    engine = ReaskingEngine(fast, lambda: ref, Band(boolean=0.2, label=0.5, span=1.0))
    doc = engine.add_prefix([1, 2])
    answers = engine.run([Request((3,), BooleanReadout(), doc), Request((4,), BooleanReadout(), doc),
                          Request((9,), BooleanReadout())])
    assert [a.value for a in answers] == [False, True, False]
    assert ref.calls == [[(1, 2, 3), (9,)]]  # the reference sees whole prompts, no prefix
    assert (engine.reasked, engine.changed) == (2, 1)


def test_the_reference_is_loaded_only_when_a_close_call_comes():
    loads = []
    fast = FakeEngine({(5,): 3.0})
    engine = ReaskingEngine(fast, lambda: loads.append(1), Band(0.2, 0.2, 0.2))
    engine.run([Request((5,), BooleanReadout())])
    assert loads == [] and engine.reasked == 0


def test_extended_prefixes_carry_their_whole_tokens():
    fast = FakeEngine({(1, 2, 7, 8, 9): 0.01})
    ref = FakeEngine({(1, 2, 7, 8, 9): 1.0})
    engine = ReaskingEngine(fast, lambda: ref, Band(0.2, 0.2, 0.2))
    [doc] = engine.add_prefixes([[1, 2]])
    [stem] = engine.extend_prefixes([doc], [7, 8])
    assert engine.run([Request((9,), BooleanReadout(), stem)])[0].value is True
    assert ref.calls == [[(1, 2, 7, 8, 9)]]


def test_a_released_prefix_is_forgotten_only_when_its_last_holder_lets_go():
    engine = ReaskingEngine(FakeEngine({}), lambda: None, Band(0.2, 0.2, 0.2))
    doc = engine.add_prefix([1, 2])
    engine.retain(doc)
    engine.release(doc)
    assert engine._tokens[doc.id] == (1, 2)
    engine.release(doc)
    assert doc.id not in engine._tokens


@pytest.mark.parametrize("readout, margin, inside", [
    (BooleanReadout(), 0.19, True), (BooleanReadout(), -0.21, False),
    (LabelReadout(("a", "b")), 0.49, True), (LabelReadout(("a", "b")), 0.51, False),
    (SpanReadout("cue"), -0.9, True), (SpanReadout("cue"), 1.1, False),
    (ScoreReadout(), 0.0, False), (GenerateReadout(), None, False)])
def test_each_readout_kind_has_its_own_width(readout, margin, inside):
    band = Band(boolean=0.2, label=0.5, span=1.0)
    assert band.holds(readout, Answer(True, margin=margin)) is inside


def test_a_band_is_read_by_file_digest_and_precision(tmp_path, monkeypatch):
    path = tmp_path / "bands.json"
    path.write_text(json.dumps({"models": {"m": {"gguf_sha256": "abc", "bands": {
        "bf16-cpu": {"boolean": 0.3, "label": 0.4, "span": 0.5}}}}}))
    monkeypatch.setattr(reask, "BANDS_FILE", path)
    assert reask.band_for("abc", "bf16-cpu") == Band(0.3, 0.4, 0.5)
    assert reask.band_for("abc", "fp8-h200") is None
    assert reask.band_for("other", "bf16-cpu") is None
    assert reask.band_for(None, "bf16-cpu") is None


def test_a_score_compared_with_a_threshold_is_re_asked_near_it():
    """P(yes) = sigmoid(margin): a margin within the yes/no band of logit(threshold) is a
    close call at that threshold; a score no SQL compares is a value, never re-asked."""
    import math

    band = Band(boolean=0.5, label=0.5, span=0.5)
    compared = ScoreReadout(thresholds=(0.7,))
    cut = math.log(0.7 / 0.3)
    assert band.holds(compared, Answer(0.7, margin=cut + 0.4))
    assert not band.holds(compared, Answer(0.9, margin=cut + 0.6))
    assert not band.holds(ScoreReadout(), Answer(0.7, margin=cut))
    assert not band.holds(ScoreReadout(thresholds=(1.0,)), Answer(0.99, margin=9.0))


class FakeWriter(FakeEngine):
    """Generated answers: text 'fast' or 'ref', margin = the table's smallest step margin."""

    def __init__(self, margins, text):
        super().__init__(margins)
        self.text = text
        self.track_decode_margins = False

    def run(self, requests):
        fulls = [(self.prefixes[r.prefix.id] if r.prefix else ()) + tuple(r.tokens)
                 for r in requests]
        self.calls.append(fulls)
        return [Answer(self.text, margin=self.margins.get(f)) for f in fulls]


def test_generated_text_within_the_decode_band_is_written_again_in_float32():
    fast = FakeWriter({(1,): 0.3, (2,): 4.0}, "fast")
    ref = FakeWriter({}, "ref")
    engine = ReaskingEngine(fast, lambda: ref, Band(0.2, 0.2, 0.2, decode=1.0))
    assert fast.track_decode_margins  # the band asks the writer for its step margins
    answers = engine.run([Request((1,), GenerateReadout()), Request((2,), GenerateReadout())])
    assert [a.value for a in answers] == ["ref", "fast"]
    assert ref.calls == [[(1,)]] and engine.reasked == 1


def test_generated_text_without_a_decode_band_is_the_fast_precisions():
    fast = FakeWriter({(1,): 0.0}, "fast")
    engine = ReaskingEngine(fast, lambda: pytest.fail("no reference without a decode band"),
                            Band(0.2, 0.2, 0.2))
    assert not fast.track_decode_margins
    assert [a.value for a in engine.run([Request((1,), GenerateReadout())])] == ["fast"]


def test_a_decode_band_that_re_asks_most_answers_writes_them_in_float32_at_once():
    fast = FakeWriter({(5,): 9.0}, "fast")
    ref = FakeWriter({}, "ref")
    engine = ReaskingEngine(fast, lambda: ref,
                            Band(0.2, 0.2, 0.2, decode=1.0, decode_direct=True))
    doc = engine.add_prefix([4])
    answers = engine.run([Request((5,), GenerateReadout(), doc),
                          Request((6,), BooleanReadout())])
    assert answers[0].value == "ref" and ref.calls[0] == [(4, 5)]
    assert fast.calls == [[(6,)]]  # only the yes/no question reached the fast engine
    assert engine.reasked == 1


def test_a_span_value_is_re_asked_near_the_sql_s_cut_points_not_its_sign():
    band = Band(0.2, 0.2, span=0.5)
    value = SpanReadout("cue", thresholds=(3.0,))
    assert band.holds(value, Answer(True, margin=2.7))
    assert not band.holds(value, Answer(True, margin=0.1))  # (no decision at the centre)
    assert not band.holds(SpanReadout("cue", thresholds=()), Answer(True, margin=0.0))
    assert band.holds(SpanReadout("cue"), Answer(True, margin=0.1))  # a pair: its sign
