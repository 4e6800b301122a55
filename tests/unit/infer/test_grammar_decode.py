"""Constrained decoding on the embedded writer (real weights, CPU): a grammar's answer always
parses as its schema, in a batch beside free-text answers, and one the model cannot finish
within its tokens is None, never a half-written value."""

from __future__ import annotations

import json

import pytest

from quail_engine.infer.api import GenerateReadout, Grammar, Request

pytestmark = pytest.mark.model

OBJECT = {"type": "object", "additionalProperties": False, "required": ["name", "city"],
          "properties": {"name": {"type": ["string", "null"]},
                         "city": {"type": ["string", "null"]}}}
TEXTS = ["Order 1234 shipped to Alice Smith in Paris on May 3.",
         "Bob paid 45 dollars for two lamps in Rome.",
         "The blender broke after two days."]


@pytest.fixture(scope="module")
def engine(require_embedded):
    require_embedded("smollm2-135m")
    import torch

    from quail_engine.infer.engine import LocalEngine

    return LocalEngine.load("smollm2-135m", dtype=torch.float32)


def _request(engine, text: str, grammar: Grammar | None, max_tokens: int = 64) -> Request:
    head, tail = engine.chat_split(text, "")
    return Request(tuple(head + tail), GenerateReadout(max_tokens=max_tokens, grammar=grammar))


def test_answers_parse_as_their_schema_in_a_mixed_batch(engine):
    obj, num = Grammar(json.dumps(OBJECT)), Grammar(json.dumps({"type": "integer"}))
    requests = [_request(engine, f"{t}\n\nExtract a JSON object with keys name and city.", obj)
                for t in TEXTS]
    requests += [_request(engine, f"{t}\n\nHow many words is that? Reply with a number.", num)
                 for t in TEXTS]
    requests.append(_request(engine, "Say hello.", None, max_tokens=8))
    answers = engine.run(requests)
    for a in answers[:3]:
        value = json.loads(a.value)
        assert set(value) == {"name", "city"}
        assert all(v is None or isinstance(v, str) for v in value.values())
    for a in answers[3:6]:
        assert isinstance(json.loads(a.value), int)
    assert isinstance(answers[6].value, str)


def test_an_answer_the_grammar_did_not_complete_is_none(engine):
    long = {"type": "object", "required": ["story"], "additionalProperties": False,
            "properties": {"story": {"type": "string"}}}
    request = _request(engine, "Write a long story about a dragon as JSON.",
                       Grammar(json.dumps(long)), max_tokens=4)
    assert engine.run([request])[0].value is None


def test_the_first_answer_of_a_batch_is_what_it_is_alone(engine):
    """Masks are computed for the batch at once: a row's answer does not depend on its
    neighbours (float32 on the CPU)."""
    obj = Grammar(json.dumps(OBJECT))
    requests = [_request(engine, f"{t}\n\nExtract a JSON object with keys name and city.", obj)
                for t in TEXTS]
    together = [a.value for a in engine.run(requests)]
    alone = [engine.run([r])[0].value for r in requests]
    assert together == alone


def test_a_bounded_arena_admits_sequences_as_others_finish(engine):
    """Continuous batching: with an arena of about two answers the decode runs every sequence
    to the same text as with no bound, never more running than fit, each prefilled once."""
    from quail_engine.infer.decode import DecodeSeq, greedy_decode

    prompts = [engine.chat_split(f"{t}\n\nSummarize in a few words.", "") for t in TEXTS * 2]
    tokens = [head + tail for head, tail in prompts]
    page = 16

    def decode(bounded: bool):
        seqs = [DecodeSeq(t, max_tokens=12) for t in tokens]
        widths, started = [], []
        runner = engine.runner
        run = runner.run

        def counting(jobs, count_as_decode=False):
            widths.append((count_as_decode, len(jobs)))
            if not count_as_decode:  # admitted in order: these seqs start now
                started.extend(seqs[len(started):len(started) + len(jobs)])
            return run(jobs, count_as_decode)

        def room():  # a fake arena: what the started, unfinished seqs hold is taken
            total = 2 * ((max(map(len, tokens)) + 12) // page + 2) * page
            held = sum((len(s.tokens) + len(s.out_tokens)) // page + 1 for s in started
                       if not s.finish)
            return total - held * page, page
        runner.run = counting
        try:
            greedy_decode(runner, seqs, engine.codec.eos_ids, engine.codec.decode,
                          room=room if bounded else None)
        finally:
            runner.run = run
        return [s.text for s in seqs], widths

    bounded, widths = decode(True)
    unbounded, _ = decode(False)
    assert bounded == unbounded
    assert max(n for is_step, n in widths if is_step) <= 2
    assert sum(n for is_step, n in widths if not is_step) == len(tokens)
    assert len([1 for is_step, _ in widths if not is_step]) > 1  # admitted in waves


def test_constrained_sequences_admitted_one_at_a_time_match_the_batch(engine):
    """A fake arena with room for one answer: each sequence starts when the one before ends
    (so no step carries another's grammar masks), and every answer equals the batch's."""
    from quail_engine.infer.decode import DecodeSeq, greedy_decode

    obj = Grammar(json.dumps(OBJECT))
    prompts = [engine.chat_split(f"{t}\n\nExtract a JSON object with keys name and city.", "")
               for t in TEXTS]
    tokens = [head + tail for head, tail in prompts]

    def decode(room):
        seqs = [DecodeSeq(t, max_tokens=40, grammar=obj) for t in tokens]
        greedy_decode(engine.runner, seqs, engine.codec.eos_ids, engine.codec.decode,
                      engine._grammar_masks(), room)
        return [(s.text, s.finish) for s in seqs]

    one_at_a_time = decode(lambda: (0, 16))  # no room: only ever the one that must run
    assert one_at_a_time == decode(None)
    assert all(finish == "grammar" for _, finish in one_at_a_time)


def test_matchers_of_one_grammar_are_independent(engine):
    """Matchers are copies of one built per grammar: a token one sequence takes must not
    advance another's, nor the copy the next sequence starts from."""
    masks = engine._grammar_masks()
    grammar = Grammar(json.dumps({"type": "integer"}))
    tokenizer = engine.codec.tokenizer
    width = engine.config.vocab_size
    first, second = masks.matcher(grammar, width), masks.matcher(grammar, width)
    digit = tokenizer.encode("7", add_special_tokens=False)[0]
    letter = tokenizer.encode("x", add_special_tokens=False)[0]
    assert masks.consume([(first, digit)]) == [True]
    assert first.is_accepting() and not second.is_accepting()
    assert masks.consume([(second, letter)]) == [False]
    assert not first.is_error() and second.is_error()
    third = masks.matcher(grammar, width)
    assert not third.is_error() and not third.is_accepting()


def test_a_grammar_forces_the_tokens_only_it_allows(engine):
    """An object's opening brace and its first key are the only tokens the grammar allows: they
    are computed once per grammar; a constant is forced whole; a number forces nothing."""
    grammars = engine._grammar_masks()
    width = engine._logits_width()
    decode = engine.codec.decode
    assert decode(grammars.forced_start(Grammar(json.dumps(OBJECT)), width)) == '{"name":'
    const = {"type": "object", "required": ["a"], "additionalProperties": False,
             "properties": {"a": {"const": "xyz"}}}
    assert decode(grammars.forced_start(Grammar(json.dumps(const)), width)) == '{"a": "xyz"}'
    assert grammars.forced_start(Grammar(json.dumps({"type": "integer"})), width) == []


def test_forced_tokens_are_prefilled_and_the_answers_do_not_change(engine, monkeypatch):
    """The first forced tokens ride in the prompt's prefill, not in decode steps (each
    constrained answer feeds len(forced) fewer), those forced mid-answer (the second key) in
    one step with the token before them, and every answer is the one the steps gave."""
    obj = Grammar(json.dumps(OBJECT))
    forced = len(engine._grammar_masks().forced_start(obj, engine._logits_width()))
    assert forced >= 2
    requests = [_request(engine, f"{t}\n\nExtract a JSON object with keys name and city.", obj)
                for t in TEXTS]
    requests.append(_request(engine, "Say hello.", None, max_tokens=8))

    def run():
        stats = engine.stats
        before = stats.decode_tokens, stats.forced_tokens, stats.forward_passes
        answers = [a.value for a in engine.run(requests)]
        return (answers, stats.decode_tokens - before[0], stats.forced_tokens - before[1],
                stats.forward_passes - before[2])

    prefilled, prefilled_fed, prefilled_forced, prefilled_passes = run()
    monkeypatch.setenv("QUAIL_FORCED_TOKENS", "0")
    stepped, stepped_fed, stepped_forced, stepped_passes = run()
    assert prefilled == stepped
    assert all(json.loads(a) is not None for a in prefilled[:3])
    assert stepped_fed - prefilled_fed == forced * len(TEXTS)
    assert (prefilled_forced, stepped_forced) == (forced * len(TEXTS), 0)
    # (the steps the first forced tokens saved, and more: the second key's)
    assert prefilled_passes < stepped_passes - forced


def test_an_answer_the_grammar_forces_whole_takes_no_decode_step(engine):
    const = {"type": "object", "required": ["a"], "additionalProperties": False,
             "properties": {"a": {"const": "xyz"}}}
    before = engine.stats.decode_tokens, engine.stats.forced_tokens
    grammar = Grammar(json.dumps(const))
    answer = engine.run([_request(engine, "Say something.", grammar)])[0]
    assert json.loads(answer.value) == {"a": "xyz"}
    assert engine.stats.decode_tokens == before[0]
    # (its tokens count as forced, its last apart, as every answer's last)
    whole = len(engine._grammar_masks().forced_start(grammar, engine._logits_width()))
    assert engine.stats.forced_tokens - before[1] == whole - 1
    # (cut by max_tokens first: unfinished, as when the steps ran out)
    short = _request(engine, "Say something.", Grammar(json.dumps(const)), max_tokens=3)
    assert engine.run([short])[0].value is None


def test_grammars_built_ahead_answer_alike_and_a_bad_one_still_fails_where_asked(engine):
    """expect_grammars (the plan's structured answers, before their first prompt) builds
    their machinery on the helper thread; the answers are those of grammars built on first
    use, and a grammar that cannot be built is reported where its answer is asked for, with
    its schema, as before."""
    import torch

    from quail_engine.errors import ExecutionError
    from quail_engine.infer.engine import LocalEngine

    ahead = LocalEngine.load("smollm2-135m", dtype=torch.float32)
    obj, bad = Grammar(json.dumps(OBJECT)), Grammar(json.dumps({"type": "no-such-type"}))
    ahead.expect_grammars([bad, obj])
    masks = ahead._grammar_masks()
    masks._helper().submit(lambda: None).result()  # (the helper ran the build before this)
    width = ahead._logits_width()
    assert (obj, width) in masks._forced and (bad, width) not in masks._forced
    requests = [_request(engine, f"{t}\n\nExtract a JSON object with keys name and city.", obj)
                for t in TEXTS]
    assert [a.value for a in ahead.run(requests)] == [a.value for a in engine.run(requests)]
    with pytest.raises(ExecutionError, match="no-such-type"):
        ahead.run([_request(ahead, TEXTS[0], bad)])
